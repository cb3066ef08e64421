// Package sql renders the per-shard id generator that shardid installs into
// every logical shard schema, from templates embedded in the binary.
//
// Two variants exist. Safe (the default) keeps a 51-bit counter
// (milliseconds << 10 | n) in a CACHE 1 sequence, derives the id from it, and
// pulls the counter up to the clock when it lags, under an advisory-lock fence
// so that no value is ever handed out twice: it cannot repeat an id at any
// rate, under any concurrency, when the clock steps back, after a crash or a
// re-install (docs/uniqueness.md gives the argument). Its hot path is one SQL
// expression that PostgreSQL inlines into the calling query. Instagram is
// Instagram's 2012 function, kept for compatibility and comparison with its
// hazards documented.
//
// The safe generator's next_id() comes in two forms on the same counter
// (Params.Generator): the PL/pgSQL one above, the default, which works on
// every PostgreSQL; and the shardid extension's C function (ext/shardid),
// lock-free, as fast as a bare sequence, installed where the extension is
// created in the database and the role is a superuser (GeneratorAuto) or
// on request (GeneratorC). Switching between them keeps every id unique
// (docs/uniqueness.md#the-c-generator).
//
//	ddl, err := sql.Render(sql.Params{Shard: 5})
//	// CREATE TABLE shard_0005.likes (id bigint PRIMARY KEY DEFAULT shard_0005.next_id(), ...)
//
// The install SQL refuses to create or replace anything in a schema where
// another role owns one of the toolkit's objects (OwnerSQLState), and
// next_id_advance never moves the counter beyond AdvanceLimitMS past the
// clock, forced or not. Render is for a caller that runs the SQL in its own
// transaction; RenderScript wraps it in one for psql.
//
// The package imports nothing of shardid and runs no SQL: callers execute
// what it renders.
package sql
