package install

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// initLockWhat names the init lock in messages.
const initLockWhat = "the catalog's init lock (another shardid init of this catalog?)"

// waitInitLock takes the catalog's init lock (a session advisory lock,
// catalog.LockClass and 1) on conn, waiting at most wait (zero:
// DefaultInitLockWait) and saying whom it waits for. Any role that may
// connect to the catalog's database can hold an advisory lock: the wait is
// bounded and its error names the holder.
func waitInitLock(ctx context.Context, conn *pgx.Conn, wait time.Duration, log *slog.Logger) error {
	if wait <= 0 {
		wait = DefaultInitLockWait
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock($1, 1)`, catalog.LockClass).Scan(&ok); err != nil {
		return fmt.Errorf("take the init lock: %w", err)
	}
	if ok {
		return nil
	}
	start := time.Now()
	holders := func(ctx context.Context) ([]pg.LockHolder, error) {
		return pg.AdvisoryHolders(ctx, conn, catalog.LockClass, 1)
	}
	hs, herr := holders(ctx)
	who := "a session"
	if herr == nil && len(hs) > 0 {
		who = hs[0].String()
	}
	log.Info("waiting for "+initLockWhat, "holder", who, "wait", wait)
	if _, err := conn.Exec(ctx, fmt.Sprintf(`SET lock_timeout = %d`, wait.Milliseconds())); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, `SELECT pg_catalog.pg_advisory_lock($1, 1)`, catalog.LockClass)
	if pg.IsLockTimeout(err) {
		return pg.LockWaitFailed(ctx, initLockWhat, start, holders)
	}
	if err != nil {
		return fmt.Errorf("wait for %s: %w", initLockWhat, err)
	}
	_, err = conn.Exec(ctx, `RESET lock_timeout`)
	return err
}
