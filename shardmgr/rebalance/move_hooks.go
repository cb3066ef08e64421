package rebalance

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// hooks are the levers the package's tests pull inside a move: unexported,
// so no caller outside the package can set them, and kept out of
// MoveOptions' own fields (MoveOptions embeds them), so that its
// documented fields are the ones a caller uses. Their zero value is a
// move as it always runs.
type hooks struct {
	// stopAfter, in tests, stops the move right after it recorded this
	// phase, as a crash there would.
	stopAfter Phase
	// afterScans, in tests, runs after an online move summed the changes
	// since its copy, or scanned both hosts, before its fence.
	afterScans func(ctx context.Context, src, dst *pgxpool.Pool) error
	// afterFence, in tests, runs once a move recorded phase fenced: its
	// source refuses writes, the catalog says moving.
	afterFence func(shard int)
	// giveBackRetry, in tests, bounds a give-back's wait for a source
	// that does not answer instead of the constant (when positive).
	giveBackRetry time.Duration
	// afterFlip, in tests, runs once the flip's catalog transaction
	// committed, before the target is opened.
	afterFlip func()
	// flipCatalog, in tests, runs in the flip's catalog transaction
	// before it changes anything; an error fails the flip there.
	flipCatalog func() error
	// crashAt, in tests, stops the mover dead at that point of the
	// cut-over (crashFlipCommitted, crashTargetOpened), as kill -9 there
	// would: no further statement, nothing given back.
	crashAt string
	// skipPreflight, in tests, runs a move as if the preflight had passed:
	// the mover's own checks are what stands between it and a server
	// whose capacity ran out after the preflight looked.
	skipPreflight bool
	// rangeCopyMinBytes, in tests, copies tables from this size on in
	// ranges of their key (0: rangeCopyMinBytes).
	rangeCopyMinBytes int64
	// copyProgressEvery, in tests, is how often a copy's rows so far
	// reach the journal (0: copyProgressEvery).
	copyProgressEvery time.Duration
	// copyRow, in tests, runs as each row of a move's copy is sent, with
	// the rows its copies sent so far; while it runs, that copy waits.
	copyRow func(rows int64)
	// beforeSnapshot, in tests, runs before each table copy of an online
	// move takes the slot's snapshot.
	beforeSnapshot func()
	// keepServerTimeouts, in tests, leaves the server's timeouts on for
	// the session that holds an online move's snapshot.
	keepServerTimeouts bool
}
