-- The guarded service of the console's tests: its business table.
CREATE TABLE parcel (
    parcel_id uuid    PRIMARY KEY,
    grams     integer NOT NULL
);
