-- A fault of the guarded service's scale the console's tests turn on and off: while it has a row, every parcel fails.
CREATE TABLE scale_fault (
    since timestamptz NOT NULL DEFAULT now()
);
