// Package localpg starts throwaway PostgreSQL servers from the system's
// binaries, for tests, the demo and benchmarks. SHARDID_PG_BIN (BinEnv)
// names another directory of binaries, such as one major's bundle from
// scripts/ensure-pg-bundles (make test-versions).
//
// A server gets a fresh data directory (copied from one initdb per process),
// a free loopback port, trust authentication for the user postgres, fast
// and non-durable settings (fsync off) and wal_level=logical. When the
// caller is root the server runs as the postgres user, since initdb and
// postgres refuse root. Servers die with the process that started them; Stop
// removes their data. StartDetached is the exception, for `shardid local`:
// a server in a directory of the caller's choosing that outlives its
// starter, and that Open finds again from that directory.
//
//	s, err := localpg.Start(ctx, localpg.Options{})
//	defer s.Stop()
//	dsn, err := s.CreateDatabase(ctx, "app")
//
// Tests use the helpers in package pgtest, which share servers across a
// test binary and give each test its own database.
package localpg
