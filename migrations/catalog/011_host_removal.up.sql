-- A drained host that holds no shard and no unfinished move may leave the
-- cluster file; shardid init then removes it from the catalog, and with it
-- the journal rows of the moves that involved it (the generation history in
-- shardid.changes keeps what happened).
ALTER TABLE shardid.moves
    DROP CONSTRAINT moves_from_host_fkey,
    DROP CONSTRAINT moves_to_host_fkey,
    ADD CONSTRAINT moves_from_host_fkey FOREIGN KEY (from_host) REFERENCES shardid.hosts (name) ON UPDATE CASCADE ON DELETE CASCADE,
    ADD CONSTRAINT moves_to_host_fkey FOREIGN KEY (to_host) REFERENCES shardid.hosts (name) ON UPDATE CASCADE ON DELETE CASCADE;
