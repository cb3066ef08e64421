package shardmgr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr/internal/base/limits"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// Sentinel errors; test with errors.Is. They say what went wrong, never
// which command to run next: the CLI adds that (cmd/shardid hint.go).
var (
	// ErrConfig is wrapped by every error about the cluster file (a file
	// that is missing also wraps fs.ErrNotExist).
	ErrConfig = errors.New("invalid cluster file")
	// ErrFileTooLarge is wrapped by the error for a file (the cluster file,
	// a migration) larger than shardid reads.
	ErrFileTooLarge = limits.ErrFileTooLarge
	// ErrLockWait: a bounded wait for a lock ran out; the error names the
	// lock and the sessions holding it (pid, role, application).
	ErrLockWait = pg.ErrLockWait
	// ErrUntrusted: a schema the toolkit was about to write into (shardid
	// on the catalog or a host, a shard's schema) was made by a role that
	// is neither the one the toolkit logs in as nor a superuser, or holds
	// an object, trigger, rule or policy of such a role. The error names
	// the object, its owner and the fix; nothing was written.
	ErrUntrusted = pgtrust.ErrUntrusted
	// ErrPooler: an operator's DSN (a host's dsn, the catalog) reaches a
	// connection pooler instead of PostgreSQL; refused before anything is
	// recorded. A pooler belongs in a host's app_dsn (docs/poolers.md).
	ErrPooler = pg.ErrPooler
	// ErrNotInitialized: the catalog has no cluster yet.
	ErrNotInitialized = errors.New("cluster not initialised")
	// ErrUnknownShard: a shard id outside 0..shards-1, or an id that
	// decodes to one.
	ErrUnknownShard = errors.New("unknown shard")
	// ErrShardList: a list of shards (ParseShardList) that does not parse.
	ErrShardList = errors.New("bad shard list")
	// ErrUnknownHost: a host the catalog or the cluster file does not know.
	ErrUnknownHost = errors.New("unknown host")
	// ErrShardReadOnly: the shard accepts reads only.
	ErrShardReadOnly = errors.New("shard is read-only")
	// ErrShardMoving: the shard is being moved to another host; writes wait
	// for the move to finish.
	ErrShardMoving = errors.New("shard is moving")
	// ErrGenerationChanged: the catalog changed since the caller read it;
	// another manager won. Re-read and decide again.
	ErrGenerationChanged = errors.New("catalog generation changed")
	// ErrClusterMismatch: the cluster file and the catalog (or a host)
	// disagree on something fixed once initialised.
	ErrClusterMismatch = errors.New("cluster file does not match the catalog")
	// ErrClosed: the router was closed.
	ErrClosed = errors.New("router closed")
	// ErrMapUnconfirmed: the router could not confirm its map with the
	// catalog for longer than WithMaxUnconfirmed allows, so it refuses
	// writes; reads go on.
	ErrMapUnconfirmed = errors.New("shard map unconfirmed: the catalog has been unreachable too long")
	// ErrMapStale is ErrMapUnconfirmed.
	//
	// Deprecated: use ErrMapUnconfirmed ("stale" is kept for a catalog
	// older than the hosts' records, ErrCatalogStale).
	ErrMapStale = ErrMapUnconfirmed
	// ErrCatalogStale: the catalog is older than what the hosts record
	// of themselves (restored from an older backup): it places shards
	// where the hosts say they are not, or is behind a generation a host
	// has seen; see *CatalogStaleError. The router refuses those shards.
	ErrCatalogStale = errors.New("catalog is older than the hosts' records")
	// ErrSQLTemplate: a query template for Shard.SQL is malformed (an
	// unbalanced brace, an empty name, an unterminated literal).
	ErrSQLTemplate = errors.New("malformed SQL template")
	// ErrCatalogTooNew: the catalog (or a host's shardid schema) was
	// migrated by a newer shardid than this one; see *CatalogVersionError.
	ErrCatalogTooNew = errors.New("catalog schema is newer than this binary")
	// ErrCatalogTooOld: the catalog (or a host's shardid schema) has not
	// been upgraded to the schema this binary needs.
	ErrCatalogTooOld = errors.New("catalog schema is older than this binary")
	// ErrCatalogDirty: a migration of the catalog (or a host's shardid
	// schema) failed half way and must be repaired by hand.
	ErrCatalogDirty = errors.New("catalog schema is dirty")
	// ErrHostUnproven: a database does not prove it is the host's: it
	// lacks the host's secret (shardid.host_secret) whose hash the
	// catalog records, or its record belongs to a role that is neither
	// the toolkit's nor a superuser (docs/operations.md#identity).
	ErrHostUnproven = errors.New("the database does not prove it is the host's")
)

// ShardError is an error about one logical shard on one host.
type ShardError struct {
	Shard int
	Host  string // empty when unknown
	Err   error
}

func (e *ShardError) Error() string {
	if e.Host == "" {
		return fmt.Sprintf("shard %d: %v", e.Shard, e.Err)
	}
	return fmt.Sprintf("shard %d on %s: %v", e.Shard, e.Host, e.Err)
}

func (e *ShardError) Unwrap() error { return e.Err }

// GenerationError reports a guarded catalog change that lost: the caller
// expected generation Want and found Got. It wraps ErrGenerationChanged.
type GenerationError struct{ Want, Got int64 }

func (e *GenerationError) Error() string {
	return fmt.Sprintf("%v: expected generation %d, catalog is at %d", ErrGenerationChanged, e.Want, e.Got)
}

func (e *GenerationError) Unwrap() error { return ErrGenerationChanged }

// ShardErrors is the error of a run that failed on some shards (or moves)
// and not on others; it comes beside the run's result, which says what the
// others did. Errs holds one error per failure in the order of the shards
// (each usually a *ShardError, or a package's own error naming its shard,
// such as *migrate.MigrationError); errors.Is and errors.As look into every
// one of them.
type ShardErrors struct {
	// Op names the run: "migrate up", "generator upgrade", "init", "apply".
	Op string
	// Total counts the shards (or moves) of the run; zero when unknown.
	Total int
	// Unit is what Total counts: "shards" when empty, or "moves".
	Unit string
	// Stopped counts the shards a fail-fast run did not start.
	Stopped int
	Errs    []error
}

// shownErrors is how many of the failures Error spells out.
const shownErrors = 3

func (e *ShardErrors) Error() string {
	unit := e.Unit
	if unit == "" {
		unit = "shards"
	}
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op + ": ")
	}
	if e.Total > 0 {
		fmt.Fprintf(&b, "%d of %d %s failed", len(e.Errs), e.Total, unit)
	} else {
		fmt.Fprintf(&b, "%d %s failed", len(e.Errs), unit)
	}
	if e.Stopped > 0 {
		fmt.Fprintf(&b, ", %d not started after the first failure (fail-fast)", e.Stopped)
	}
	for i, err := range e.Errs {
		if i == shownErrors {
			fmt.Fprintf(&b, "; and %d more", len(e.Errs)-shownErrors)
			break
		}
		b.WriteString("; ")
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *ShardErrors) Unwrap() []error { return e.Errs }
