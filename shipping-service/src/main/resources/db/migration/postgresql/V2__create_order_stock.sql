-- What the stock service reserved for each order (stock.stock.reserved.v1): one row per event applied. No unique key,
-- on purpose: the guard is what keeps a copy of the event from adding a second row, and a second row would show it.
CREATE TABLE order_stock (
    order_id     uuid        NOT NULL,
    reservations int         NOT NULL,
    reserved_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX order_stock_order_id_idx ON order_stock (order_id);

-- The orders that can leave: paid (or already ready to ship) and their stock reserved.
CREATE VIEW order_ready AS
SELECT s.order_id
FROM order_status s
WHERE s.status IN ('PAID', 'READY_TO_SHIP')
  AND EXISTS (SELECT 1 FROM order_stock r WHERE r.order_id = s.order_id);
