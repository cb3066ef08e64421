package main

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
	"github.com/shardid/shardid/shardmgr/verify"
)

// The packages' errors carry no CLI advice; the CLI adds it from their
// sentinels, wherever in the chain they are.
func TestHints(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("shard 0 on pg4: move 1: %w: log", rebalance.ErrNoReplicaIdentity), "--mode offline"},
		{fmt.Errorf("catalog: %w", shardmgr.ErrNotInitialized), "run shardid init"},
		{&shardmgr.ShardErrors{Op: "migrate up", Errs: []error{fmt.Errorf("%w: x", migrate.ErrShardSchemaMissing)}}, "run shardid init"},
		{fmt.Errorf("%w: %w", rebalance.ErrMigrationsNeeded, fmt.Errorf("version 2")), "--dir"},
		{fmt.Errorf("%w: f.yaml: host pg4 is not in the catalog", rebalance.ErrHostsNotApplied), "run shardid init to apply the cluster file's hosts"},
		{fmt.Errorf("move 1: %w: after 30m0s (the catch-up timeout)", rebalance.ErrCatchupTimeout), "--catchup-timeout"},
		{fmt.Errorf("%w for subscription s: all 4 slots are taken", rebalance.ErrNoWorker), "--workers"},
		{&shardmgr.ShardErrors{Op: "migrate up", Total: 4, Stopped: 3, Errs: []error{fmt.Errorf("x")}}, "--fail-fast"},
		{fmt.Errorf("host pg1: %w: on timeline 2", hosts.ErrNeedsFailover), "shardid host failover NAME --to-dsn DSN"},
		{fmt.Errorf("host pg1: %w: %w: its system identifier is 2", hosts.ErrNotStandbyOf, hosts.ErrAnotherServer), "shardid host failover NAME --to-dsn DSN --new-server"},
		{fmt.Errorf("host pg1: %w: %w: system identifier 2", hosts.ErrNotSameDatabase, hosts.ErrAnotherServer), "--new-server"},
		{fmt.Errorf("host pg1: %w", hosts.ErrOldServerWritable), "stop the old server"},
		{fmt.Errorf("%w: the catalog database h/x does not exist", install.ErrCatalogEmpty), "a mistyped database name?"},
		{fmt.Errorf("%w: host pg1 records identity y", install.ErrOtherCatalog), "check its catalog DSN"},
		{fmt.Errorf("host pg1: %w: it does not hold the host's secret", shardmgr.ErrHostUnproven), "point the host at its own database"},
		{fmt.Errorf("shard 1: %w: t", rebalance.ErrUnloggedTable), "SET LOGGED"},
		{fmt.Errorf("target pg4: %w: role r", rebalance.ErrConnInfoPasswordNeeded), "--conninfo-password=omit"},
		{fmt.Errorf("host pg1: database app: %w", shardmgr.ErrUntrusted), "docs/operations.md#trust"},
		{fmt.Errorf("host pg1: %w: the host's role is not a superuser", install.ErrNoCGenerator), "set generator: auto in the cluster file"},
	} {
		require.Contains(t, errorWithHint(tc.err), tc.want, "%v", tc.err)
	}
	// A server timeout that still ended a session: the setting and the fix.
	for code, setting := range map[string]string{"25P03": "idle_in_transaction_session_timeout", "25P04": "transaction_timeout"} {
		err := fmt.Errorf("shard 1: copy: %w", &pgconn.PgError{Severity: "FATAL", Code: code, Message: "terminating connection due to a timeout"})
		require.Contains(t, errorWithHint(err), "the server's "+setting+" ended the toolkit's session", code)
		require.Contains(t, errorWithHint(err), "ALTER ROLE name SET "+setting+" = 0", code)
	}
	err := fmt.Errorf("move 1: %w", &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"})
	require.Contains(t, errorWithHint(err), "the server's statement_timeout ended")
	require.Empty(t, hint(fmt.Errorf("%w", &pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"})))
	require.Empty(t, hint(fmt.Errorf("plain")))
	// No connection slot free: the limits to look at.
	full := fmt.Errorf("catalog: %w", &pgconn.PgError{Severity: "FATAL", Code: "53400", Message: "configuration limit exceeded"})
	require.NotContains(t, errorWithHint(full), "connection slot")
	full = fmt.Errorf("host pg3: %w", &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"})
	require.Contains(t, errorWithHint(full), "no connection slot free")
	require.Contains(t, errorWithHint(full), "max_connections")
}

// A verify finding names what is wrong; the CLI adds the command that
// repairs it (the library's Detail names none).
func TestVerifyFixes(t *testing.T) {
	p := verify.Problem{Check: verify.CheckPlacement, Shard: 5, Host: "pg4", Detail: "copy on pg4 belongs to unfinished move 3", Fix: verify.FixResumeOrAbortMove}
	require.Equal(t, "placement shard 5 on pg4: copy on pg4 belongs to unfinished move 3 (resume with `shardid rebalance apply`, undo with `shardid rebalance abort --shard 5`)", withFix(p))
	for fix := verify.FixInit; fix <= verify.FixNewServer; fix++ {
		require.NotEmpty(t, verifyFixes[fix], "fix %d has a command", fix)
	}
	p.Fix = verify.FixNone
	require.Equal(t, p.String(), withFix(p))
}
