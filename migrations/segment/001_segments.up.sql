-- One row per business tag: the highest id this database has handed out
-- in a segment, and its place in the id layout. With N sources (stride N),
-- the database at position i (residue i) only ever hands out ids congruent
-- to i modulo N, so several databases never collide.
CREATE TABLE IF NOT EXISTS shardid.segments (
    tag        text PRIMARY KEY,
    max_id     bigint NOT NULL,
    step       integer NOT NULL CHECK (step > 0),
    stride     integer NOT NULL CHECK (stride > 0),
    residue    integer NOT NULL CHECK (residue >= 0 AND residue < stride),
    -- A fenced row hands out nothing: set while the layout changes
    -- (adding a source, docs/segments.md).
    fenced     boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT segments_max_id_residue CHECK (max_id % stride = residue)
);
