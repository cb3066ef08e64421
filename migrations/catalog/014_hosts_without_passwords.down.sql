-- The passwords stripped by 014 are gone; the DSNs without them still
-- work with every older binary (the password from the cluster file,
-- PGPASSWORD or a passfile). Nothing to undo.
SELECT 1;
