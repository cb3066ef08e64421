-- Each host's server identity, so that a failover can be checked and its
-- ids kept unique (docs/uniqueness.md#failover): the server's
-- system_identifier (pg_control_system(), shared by a primary and every
-- standby made from it by pg_basebackup), the WAL timeline it was on (a
-- promotion starts a new one) and how far its clock was seen ahead of the
-- manager's. init records them for a host that has none; `shardid host
-- failover` records the promoted standby's. NULL for rows of an older
-- binary until init runs. New nullable columns: older binaries read on
-- (min_reader stays).

ALTER TABLE shardid.hosts
    ADD COLUMN system_identifier text,
    ADD COLUMN timeline          bigint CHECK (timeline > 0),
    ADD COLUMN clock_ahead_ms    bigint CHECK (clock_ahead_ms >= 0),
    ADD COLUMN identified_at     timestamptz;
