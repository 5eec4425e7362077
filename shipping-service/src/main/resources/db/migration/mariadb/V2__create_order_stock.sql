-- The reservations stock reported for each order, and the orders ready to ship, on MariaDB.
CREATE TABLE order_stock (
    order_id     UUID         NOT NULL,
    reservations INT          NOT NULL,
    reserved_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    INDEX order_stock_order_id_idx (order_id)
) DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;

CREATE VIEW order_ready AS
SELECT s.order_id
FROM order_status s
WHERE s.status IN ('PAID', 'READY_TO_SHIP')
  AND EXISTS (SELECT 1 FROM order_stock r WHERE r.order_id = s.order_id);
