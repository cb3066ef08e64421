-- The oldest catalog schema whose binaries may still read this catalog
-- (docs/upgrading.md). A binary that finds the catalog newer than it knows
-- reads on (the router, status, verify) only when min_reader is at most its
-- own version; it writes only a catalog of exactly its own version.
--
-- A migration that keeps the catalog readable by the previous binaries
-- (new tables, new columns with defaults) leaves min_reader alone; one that
-- changes what they read (drops, renames, new meanings of old values)
-- raises it to its own version in the same file.

CREATE TABLE shardid.catalog_readers (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    min_reader  integer     NOT NULL CHECK (min_reader > 0)
);
INSERT INTO shardid.catalog_readers (min_reader) VALUES (11);
