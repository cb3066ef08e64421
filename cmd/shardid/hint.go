package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
	"github.com/shardid/shardid/shardmgr/repair"
	"github.com/shardid/shardid/shardmgr/verify"
)

// hints maps the packages' sentinel errors to what to do next. The
// packages are libraries: their errors say what went wrong and never name
// a command or a flag; the CLI adds that here. The first match wins.
var hints = []struct {
	is   func(error) bool
	hint string
}{
	{func(err error) bool { return errors.Is(err, shardmgr.ErrConfig) && errors.Is(err, fs.ErrNotExist) }, "use --config or SHARDID_CONFIG; shardid local up writes one for local servers"},
	{is(shardmgr.ErrCatalogDirty), "repair it by hand and clear the dirty flag: see docs/upgrading.md"},
	{is(shardmgr.ErrCatalogTooNew), "upgrade the binary; shardid version shows the schema it knows"},
	{is(shardmgr.ErrCatalogTooOld), "run shardid init with this binary to upgrade it"},
	{is(shardmgr.ErrNotInitialized), "run shardid init"},
	{is(install.ErrCatalogEmpty), "check the catalog's DSN in the cluster file (a mistyped database name?); a catalog lost or emptied: shardid catalog repair --from-hosts rebuilds it from the hosts' records, into its empty database or over its restored backup (docs/operations.md#identity)"},
	{is(install.ErrOtherCatalog), "the cluster file names another cluster's catalog: check its catalog DSN (docs/operations.md#identity)"},
	{is(shardmgr.ErrHostUnproven), "the database at that address is not the host's own (its record was made by another role, or copied without its secret): point the host at its own database (docs/operations.md#identity)"},
	{is(shardmgr.ErrCatalogStale), "the catalog was restored from an older backup? rebuild its map from the hosts' records: shardid catalog repair --from-hosts"},
	{is(repair.ErrHostsDisagree), "the hosts' records do not say where these shards live: see shardid verify, keep the right copy and drop or fence the other, then run the repair again"},
	{is(repair.ErrHostUnreadable), "every host of the cluster file must answer: bring it back, or take it out of the file if it holds nothing"},
	{is(repair.ErrChangedSincePlan), "run it again to see the new plan"},
	{is(hosts.ErrAnotherServer), "the host's database was restored onto this server (pg_dump, pg_restore)? shardid host failover NAME --to-dsn DSN --new-server advances its counters and records it"},
	{is(hosts.ErrSameServer), "the host's own server or its standby: run it without --new-server"},
	{is(hosts.ErrOldServerWritable), "stop the old server (or make it a standby) first, then run this again"},
	{is(hosts.ErrNotPromoted), "promote the standby first (pg_ctl promote, or SELECT pg_promote()), then run this again"},
	{is(hosts.ErrNotStandbyOf), "give --to-dsn the DSN of the host's database on the promoted standby; a new address of the same server is not a failover"},
	{is(hosts.ErrNotIdentified), "run shardid init while the host's server is reachable: it records the server's identity"},
	{is(hosts.ErrHostMoving), "finish the move with shardid rebalance apply, or undo it with shardid rebalance abort"},
	{is(shardmgr.ErrUntrusted), "another role made or changed it: check what it does, then drop it or give it to the toolkit's role as the error says (docs/operations.md#trust), and run this again"},
	{is(shardmgr.ErrLockWait), "run it again once the session named is done, or end it (SELECT pg_terminate_backend(pid))"},
	{is(migrate.ErrShardSchemaMissing), "run shardid init"},
	{is(migrate.ErrNoGenerator), "run shardid init"},
	{is(migrate.ErrForeignGenerator), "run shardid verify"},
	{is(migrate.ErrGeneratorTooNew), "upgrade the binary"},
	{is(migrate.ErrUnknownVersion), "wrong --dir?"},
	{is(rebalance.ErrMigrationsNeeded), "pass the migrations directory (--dir, or migrations: in the cluster file)"},
	{is(rebalance.ErrShardTables), "make each table in a migration, or move it out of the shard's schema"},
	{is(rebalance.ErrNotCleaned), "the shard serves on its new host; finish the move with shardid rebalance cleanup"},
	{is(rebalance.ErrTargetOpen), "finish the move with shardid rebalance apply"},
	{is(rebalance.ErrSourceFenced), "once the source answers, shardid rebalance apply resumes the move, or shardid rebalance abort gives the shard back"},
	{is(rebalance.ErrMoveOpen), "resume it with shardid rebalance apply, or shardid rebalance abort"},
	{is(rebalance.ErrMoveFlipped), "finish it with shardid rebalance apply; to undo it, move the shard back with shardid shard move"},
	{is(rebalance.ErrGeneratorVariant), "run shardid migrate generator"},
	{is(rebalance.ErrMigrationFailed), "see shardid migrate status"},
	{is(rebalance.ErrTargetOccupied), "see shardid verify"},
	{is(rebalance.ErrNoReplicaIdentity), "use --mode offline"},
	{is(rebalance.ErrUnloggedTable), "use --mode offline, or ALTER TABLE ... SET LOGGED"},
	{is(rebalance.ErrConnInfoPasswordNeeded), "drop --conninfo-password=omit, or run the move as a superuser on the target"},
	{is(rebalance.ErrMissingRole), "create the role on that host with the same name, then run the move again (or shardid rebalance abort)"},
	{is(rebalance.ErrForeignOwner), "only the role that runs moves may own the fence: see docs/rebalance.md, The fence"},
	{is(rebalance.ErrCatchupTimeout), "raise --catchup-timeout, or move while the shard takes fewer writes"},
	{is(rebalance.ErrNoWorker), "or lower --workers"},
	{func(err error) bool { var se *shardmgr.ShardErrors; return errors.As(err, &se) && se.Stopped > 0 }, "--fail-fast stopped the run; fix the failure and run it again"},
	{is(rebalance.ErrHostsNotApplied), "run shardid init to apply the cluster file's hosts to the catalog, then run this again"},
	{is(hosts.ErrHostInUse), "shardid host drain moves its shards away; shardid rebalance cleanup --all drops retired copies; an unfinished move: shardid rebalance apply or abort"},
	{is(hosts.ErrNeedsFailover), "a promoted standby takes shardid host failover NAME --to-dsn DSN, which advances every shard's counter past the old primary's ids before it records the DSN"},
	{is(hosts.ErrNotSameDatabase), "point the host at its own database (its promoted standby: shardid host failover NAME --to-dsn DSN); see docs/operations.md"},
	{is(shardmgr.ErrPooler), "give dsn: PostgreSQL's own address and put the pooler under app_dsn: for the applications (docs/poolers.md)"},
	{is(hosts.ErrUnreachable), "check the address, and that the server runs and accepts this role"},
	{is(install.ErrNoCGenerator), "set generator: auto in the cluster file (the C generator where it can be installed, PL/pgSQL elsewhere), or run init as a superuser on a server that offers the extension (docs/uniqueness.md#the-c-generator)"},
	{is(install.ErrHostInUse), "drain it first: drain: true, shardid init, then shardid rebalance apply; a retired copy goes with shardid rebalance cleanup --all, an unfinished move with abort"},
	{is(shardmgr.ErrUnknownHost), "a host must be in the cluster file and registered by shardid init"},
	{is(repair.ErrStrayHasRows), "copy those rows into the live copy (shardid shard where N) or delete them, then run this again"},
	{is(repair.ErrNotStray), "see shardid verify"},
	{is(cluster.ErrBudgetTooSmall), "raise --conns-per-server"},
	{tooManyConnections, "the server had no connection slot free for the toolkit's role (max_connections, or a CONNECTION LIMIT on the role or the database): end idle sessions there or raise the limit, then run this again"},
}

// tooManyConnections reports whether a server refused a connection of err
// for want of a slot (SQLSTATE 53300).
func tooManyConnections(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.TooManyConnections
}

// verifyFixes says which command repairs a verify finding (verify.Fix):
// the library names the step, the CLI its command.
var verifyFixes = map[verify.Fix]string{
	verify.FixInit:              "run shardid init",
	verify.FixGenerator:         "run shardid migrate generator",
	verify.FixInitOrGenerator:   "run shardid init or shardid migrate generator",
	verify.FixDropRetiredCopy:   "drop it: shardid rebalance cleanup --all",
	verify.FixCleanupRetired:    "shardid rebalance cleanup drops the retired copy",
	verify.FixFinishMove:        "finish it with `shardid rebalance apply`",
	verify.FixResumeOrAbortMove: "resume with `shardid rebalance apply`, undo with `shardid rebalance abort --shard %d`",
	verify.FixRepairCatalog:     "rebuild the catalog's map from the hosts' records: shardid catalog repair --from-hosts",
	verify.FixFailover:          "repair: shardid host failover %s --to-dsn DSN, with the DSN of the server it now reaches",
	verify.FixUntrusted:         "check what the role planted, then run the SQL the problem names as a superuser, and run shardid verify again",
	verify.FixNewServer:         "repair: shardid host failover %s --to-dsn DSN --new-server, with the DSN of the server it now reaches",
	verify.FixDropStray:         "drop it once it holds no row the live copy lacks: shardid shard drop-stray %d --host %s",
}

// withFix is a verify finding as the CLI prints it: with the command that
// repairs it, when one does.
func withFix(p verify.Problem) string {
	fix, ok := verifyFixes[p.Fix]
	if !ok {
		return p.String()
	}
	switch d, h := strings.Contains(fix, "%d"), strings.Contains(fix, "%s"); {
	case d && h:
		fix = fmt.Sprintf(fix, p.Shard, p.Host)
	case d:
		fix = fmt.Sprintf(fix, p.Shard)
	case h:
		fix = fmt.Sprintf(fix, p.Host)
	}
	return p.String() + " (" + fix + ")"
}

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// hint is the advice for err, "" when there is none.
func hint(err error) string {
	if err == nil {
		return ""
	}
	for _, h := range hints {
		if h.is(err) {
			return h.hint
		}
	}
	return timeoutHint(err)
}

// timeoutHint names the server setting that ended err's statement or
// session, and the fix: shardid turns statement_timeout,
// idle_in_transaction_session_timeout and transaction_timeout off for its
// own sessions, so one that still applies comes from somewhere it cannot
// override (a proxy, a session setting forced by the service).
func timeoutHint(err error) string {
	switch s := pgsession.TimeoutSetting(err); s {
	case "statement_timeout", "idle_in_transaction_session_timeout", "transaction_timeout":
		return fmt.Sprintf("the server's %s ended the toolkit's session; shardid sets it to 0 for its own sessions, so something it cannot override applies it: turn it off for this role (ALTER ROLE name SET %s = 0) or at the proxy, then run this again (docs/compatibility.md#managed-postgresql-no-superuser)", s, s)
	}
	return ""
}

// errorWithHint is err's message followed by its hint in parentheses. A
// refused connection leads with the server's reason (pgsession.ServerFirst),
// whichever package's pool made it.
func errorWithHint(err error) string {
	if err == nil {
		return ""
	}
	err = pgsession.ServerFirst(err)
	if h := hint(err); h != "" {
		return err.Error() + " (" + h + ")"
	}
	return err.Error()
}
