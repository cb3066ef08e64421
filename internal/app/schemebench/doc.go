// Package schemebench measures the id schemes of docs/schemes.md side by
// side in one run on one server: ids per second generated inside
// PostgreSQL (the safe generator, Instagram's function, the uuidv7() of
// package sql, gen_random_uuid(), a bare nextval), ids per second in Go
// (idgen/snowflake, the segment allocator), and what the key type does to
// a table (bulk insert time and primary key size for a time-ordered bigint,
// UUIDv7 and random UUIDv4). Cases are interleaved round by round and each
// reports its median, because the machines it runs on are small and noisy.
//
// It is one of the CLI's tools (internal/app), behind `shardid bench
// schemes`; it links idgen/segment and idgen/snowflake, which no
// foundation may.
package schemebench
