-- shardid.console_audit: the actions taken through the operator console
-- (docs/console.md#audit-log): who asked (the --user-header's value, else
-- the client's address), when, what (the action and its parameters), the
-- result ('ok', 'running' while an apply runs, or the error line), how
-- long it took, and which database role wrote the row. The console writes
-- a row when an action starts and completes it when the action ends; a
-- request refused for its input is one row with the refusal.
--
-- Only the toolkit's role (its owner) reads or writes it: nothing is
-- granted to PUBLIC, nor to the routing roles of docs/upgrading.md.
-- New table: older binaries read on (min_reader stays).

CREATE TABLE shardid.console_audit (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    who         text        NOT NULL,
    action      text        NOT NULL,
    params      jsonb       NOT NULL DEFAULT '{}',
    result      text        NOT NULL,
    duration_ms bigint      CHECK (duration_ms >= 0),
    db_role     text        NOT NULL DEFAULT current_user
);
REVOKE ALL ON shardid.console_audit FROM PUBLIC;

COMMENT ON TABLE shardid.console_audit IS 'shardid: actions taken through the operator console (docs/console.md)';
