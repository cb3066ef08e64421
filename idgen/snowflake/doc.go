// Package snowflake generates Twitter-Snowflake-style 64-bit ids in
// process, for any split of the bits into time, datacenter, worker and
// sequence, with worker ids leased from a PostgreSQL table instead of
// ZooKeeper or a configuration file.
//
// An id is, from the top, a 0 sign bit, TimeBits of time units since an
// epoch, the node (DatacenterBits of datacenter, WorkerBits of worker) and
// SeqBits of sequence; Layout describes the split. Twitter (the zero
// Layout: 41/5/5/12 in milliseconds since 2010-11-04) and Sonyflake (39
// bits of 10 ms, 8 of sequence above 16 of machine) are predefined.
//
// A Generator keeps the last (tick, sequence) it handed out in one atomic
// word and moves it up with a compare-and-swap, so NextID takes no lock and
// ids from one generator strictly increase. When a tick's sequence is used
// up it waits for the next tick rather than borrow from the future. When
// the clock steps back it waits out a step of up to Settings.MaxBackstep
// (default 5 ms) and refuses a larger one with ErrClockMovedBackwards; it
// never hands out an id twice.
//
// New builds a generator for a node the caller vouches for. Start leases
// the node's worker id from the shardid.snowflake_leases table
// (migrations.Snowflake) of a database the caller passes in:
//
//   - A lease is taken with a fencing token, a number that grows with every
//     acquisition, and renewed by a heartbeat; it expires after a TTL.
//   - The holder stops issuing ids a tenth of the TTL before the lease can
//     expire in the database unless a renewal got through, so a process cut
//     off from the database falls silent before anyone can take its worker.
//   - Each renewal first records in the lease row the last time the holder
//     may put into an id (its clock plus the TTL), and the generator never
//     goes past what the row says. The next holder of the worker starts
//     strictly after that time, so a restart, a takeover or a clock that
//     ran ahead cannot repeat an id; Close records the last time actually
//     used, so a clean restart need not wait.
//   - Start takes a worker whose last possible time is already behind this
//     process's clock when there is one (a worker used by a process whose
//     clock ran ahead is left for later), and otherwise waits for one at most
//     WithMaxWait (Generator.Ready says ErrLeaseNotYetUsable meanwhile).
//   - A renewal that does not find the holder's token stops the generator at
//     once (ErrLeaseLost); it then leases a worker again by itself and issues
//     again, strictly after everything the old lease covered.
//   - shardid.snowflake_lease_marks keeps, per datacenter, the highest worker
//     ever leased and the newest promise any holder made, so a row deleted by
//     hand under a live holder cannot make its worker look fresh: its next
//     holder starts after that promise.
//
// These answer the failures reported against Leaf's Snowflake mode: worker
// ids reused after a restart while the old process still ran, and ids
// repeated after the clock stepped back.
//
//	g, err := snowflake.Start(ctx, pool, snowflake.Settings{Datacenter: 1})
//	if err != nil { ... }
//	defer g.Close(ctx)
//	id, err := g.NextID()
//
// Per id, the clock read is most of the cost: NextIDs fills a slice from
// one reading, and Settings{Now: CoarseNow} replaces the read with an
// atomic load of a time kept by a background goroutine. Twitter's 12
// sequence bits cap a worker at 4,096 ids per millisecond whatever the
// generator costs; docs/schemes.md has the figures.
package snowflake
