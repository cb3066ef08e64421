-- A move's target token (issue 27, item 3): a random value the move writes
-- (as a digest, in the schema's comment) with the target schema it creates,
-- and checks before it builds on a schema it finds there, so that a schema
-- another role made in advance, even with the move's predictable comment,
-- is never taken for the move's own. Never shown (not in the journal's
-- output). NULL for moves journaled by an older binary: those are checked
-- by the comment and the schema's owner alone. A new nullable column:
-- older binaries read on (min_reader stays).

ALTER TABLE shardid.moves ADD COLUMN target_token text;
