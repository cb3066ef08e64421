package rebalance

import "errors"

// Sentinel errors of the package; test with errors.Is. They say what went
// wrong, never which command to run next (the CLI adds that).
var (
	// ErrMigrationsNeeded: the shard was migrated, so building it on the
	// target needs the migrations directory it was migrated with.
	ErrMigrationsNeeded = errors.New("the shard is at a migration version above 0 and no migrations were given")
	// ErrShardTables: a moving shard has tables its migrations do not make
	// (made by hand, or another tool's version table), or lacks one they
	// make; the target, built from the migrations, could not take them.
	ErrShardTables = errors.New("the shard's tables are not the ones its migrations make")
	// ErrMoveCheck: the target's copy does not match the source's (row counts,
	// checksums, tables or migration version); nothing was flipped.
	ErrMoveCheck = errors.New("the copy does not match the source")
	// ErrMoveBusy: another manager is running or aborting the move.
	ErrMoveBusy = errors.New("another manager is working on this move")
	// ErrMoveOpen: the shard already has a move that has not finished.
	ErrMoveOpen = errors.New("the shard has an unfinished move")
	// ErrMoveFlipped: the move already flipped the map, so it cannot be
	// aborted; move the shard back like any other move.
	ErrMoveFlipped = errors.New("the move already flipped the map")
	// ErrNoMove: there is no unfinished move to act on.
	ErrNoMove = errors.New("no unfinished move")
	// ErrNoTargetHost: every host of the cluster file is draining, so there
	// is nowhere to move shards to.
	ErrNoTargetHost = errors.New("no host to move shards to (every host is draining)")
	// ErrApplyBusy: another manager kept working for longer than
	// ApplyOptions.Wait.
	ErrApplyBusy = errors.New("another manager is still working")
	// ErrNotCleaned: a move flipped (the shard serves on its new host) but
	// a step after the flip failed: the replication objects, the target's
	// move triggers or the source's copy are left; running the move
	// again, Apply or Cleanup finishes it.
	ErrNotCleaned = errors.New("the move flipped but its cleanup did not finish")
	// ErrTargetOpen: a move's target copy was opened and may hold writes
	// acknowledged there, so it is not dropped; run the move to finish it.
	ErrTargetOpen = errors.New("the target's copy is open and may hold acknowledged writes")
	// ErrSourceFenced: a move failed and left its source fenced (writes
	// refused) because giving it back failed too (the source did not
	// answer within a minute, say); run the move again or abort it.
	ErrSourceFenced = errors.New("the source stays fenced")
	// ErrNoWorker: the target's server did not start the apply worker of
	// an online move's subscription (its worker slots are taken, or it did
	// not within MoveOptions.WorkerStartTimeout).
	ErrNoWorker = errors.New("no logical replication worker on the target")
	// ErrCatchupTimeout: an online move's target did not catch up with
	// the source within MoveOptions.CatchupTimeout.
	ErrCatchupTimeout = errors.New("catch-up did not finish in time")
	// ErrReplicationFailed: the target's apply worker failed during the
	// move (the error names what the move can see of the cause).
	ErrReplicationFailed = errors.New("the target's logical replication fails")
	// ErrGeneratorVariant: the cluster's generator is not the safe one,
	// whose counter a move carries over.
	ErrGeneratorVariant = errors.New("the cluster's generator cannot be moved")
	// ErrMigrationFailed: the source shard has a failed migration recorded.
	ErrMigrationFailed = errors.New("a failed migration is recorded")
	// ErrSnapshotLost: an online move's copy could not take the snapshot
	// its slot exported, because the session that held it ended (the
	// error says why: a server timeout it names, or a termination).
	ErrSnapshotLost = errors.New("the replication slot's snapshot is gone")
	// ErrTargetOccupied: the target host already has a schema of the
	// shard's name that this move did not make.
	ErrTargetOccupied = errors.New("the target already holds the shard's schema")
	// ErrNoReplicaIdentity: an online move needs every table to have a
	// primary key or replica identity to follow changes.
	ErrNoReplicaIdentity = errors.New("tables without a primary key or replica identity cannot follow changes online")
	// ErrUnloggedTable: an online move of a shard with an unlogged table,
	// which logical replication cannot publish.
	ErrUnloggedTable = errors.New("unlogged tables cannot follow changes online")
	// ErrConnInfoPasswordNeeded: MoveOptions.ConnInfoPassword omits the
	// password from a subscription whose owner is not a superuser.
	ErrConnInfoPasswordNeeded = errors.New("the subscription's conninfo needs the source's password")
	// ErrUnmovable: the shard holds a table a move cannot carry: a
	// foreign table, or a partition or child table on the other side of
	// the shard's schema from its parent.
	ErrUnmovable = errors.New("the shard holds tables a move cannot carry")
	// ErrPreflight: the hosts cannot run the moves as asked (a setting, a
	// free slot or worker, a right, a key); nothing was changed. The
	// *PreflightError carries the failed checks.
	ErrPreflight = errors.New("preflight")
	// ErrHostsNotApplied: the cluster file adds or changes hosts (a new
	// host, a new DSN, a drain mark) that the catalog, where hosts are at
	// run time, does not have yet; a move never applies them itself.
	ErrHostsNotApplied = errors.New("the cluster file's hosts differ from the catalog's")
)
