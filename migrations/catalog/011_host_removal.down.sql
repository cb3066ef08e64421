ALTER TABLE shardid.moves
    DROP CONSTRAINT moves_from_host_fkey,
    DROP CONSTRAINT moves_to_host_fkey,
    ADD CONSTRAINT moves_from_host_fkey FOREIGN KEY (from_host) REFERENCES shardid.hosts (name) ON UPDATE CASCADE,
    ADD CONSTRAINT moves_to_host_fkey FOREIGN KEY (to_host) REFERENCES shardid.hosts (name) ON UPDATE CASCADE;
