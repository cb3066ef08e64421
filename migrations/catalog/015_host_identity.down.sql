ALTER TABLE shardid.hosts
    DROP COLUMN system_identifier,
    DROP COLUMN timeline,
    DROP COLUMN clock_ahead_ms,
    DROP COLUMN identified_at;
