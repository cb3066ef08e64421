package shardmgr

import (
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The router's options, checked when Open or OpenCatalog builds the
// router (the convention every package of shardid follows, doc.go).

// DefaultRefreshInterval is how often a router compares its generation
// with the catalog's unless WithRefreshInterval says.
const DefaultRefreshInterval = time.Second

// RouterOption adjusts a Router. Options are checked when the router is
// built: Open and OpenCatalog return the error of one given a value it
// cannot use, naming it.
type RouterOption func(*routerOptions) error

type routerOptions struct {
	refresh        time.Duration
	poolConfig     func(host string, cfg *pgxpool.Config)
	lookup         func(string) (string, bool)
	maxUnconfirmed time.Duration
	log            *slog.Logger
	// retryMoving is how long Tx and ReadTx retry a moving shard
	// (WithRetryMoving).
	retryMoving time.Duration
}

// newRouterOptions applies opts over the defaults.
func newRouterOptions(opts []RouterOption) (routerOptions, error) {
	o := routerOptions{refresh: DefaultRefreshInterval, maxUnconfirmed: DefaultMaxUnconfirmed, log: slog.Default()}
	for _, opt := range opts {
		if opt == nil {
			return o, errors.New("shardmgr: nil RouterOption")
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithRefreshInterval sets how often the router compares its generation
// with the catalog's before handing out a shard (one cheap query; a new
// generation reloads the map). Zero checks on every call; a negative
// interval never checks, leaving it to Reload (except to confirm that a
// shard moved when a host says its copy is fenced or gone). While writes
// go to a shard the map holds as moving, the router checks every 25 ms
// (or at this interval when shorter), so that they are refused no longer
// than the move refuses them. Without it, DefaultRefreshInterval (1s).
func WithRefreshInterval(d time.Duration) RouterOption {
	return func(o *routerOptions) error { o.refresh = d; return nil }
}

// WithPoolConfig adjusts each host's pool configuration before the pool is
// created (MaxConns, hooks, tracers); f must not be nil. Without it, the
// pools keep pgxpool's configuration of the DSN.
func WithPoolConfig(f func(host string, cfg *pgxpool.Config)) RouterOption {
	return func(o *routerOptions) error {
		if f == nil {
			return errors.New("shardmgr: WithPoolConfig(nil): want a function")
		}
		o.poolConfig = f
		return nil
	}
}

// WithLookupEnv resolves ${VAR} in host DSNs that the router reads from
// the catalog (OpenCatalog, or hosts added after Open); pass os.LookupEnv
// to use the environment; lookup must not be nil. Without it, such a DSN
// is an error.
func WithLookupEnv(lookup func(string) (string, bool)) RouterOption {
	return func(o *routerOptions) error {
		if lookup == nil {
			return errors.New("shardmgr: WithLookupEnv(nil): want a function (os.LookupEnv for the environment)")
		}
		o.lookup = lookup
		return nil
	}
}

// WithMaxUnconfirmed sets how long the router keeps taking writes on a
// map it cannot confirm, the catalog unreachable. Past it, Tx refuses with
// ErrMapUnconfirmed (reads go on). Zero refuses writes from the first failed refresh; a negative
// bound never refuses (the hosts' fences alone keep a moving shard safe).
// Without it, DefaultMaxUnconfirmed (5m).
func WithMaxUnconfirmed(d time.Duration) RouterOption {
	return func(o *routerOptions) error { o.maxUnconfirmed = d; return nil }
}

// WithMaxStaleness is WithMaxUnconfirmed. Without it,
// DefaultMaxUnconfirmed (5m).
//
// Deprecated: use WithMaxUnconfirmed.
func WithMaxStaleness(d time.Duration) RouterOption { return WithMaxUnconfirmed(d) }

// WithLogger sets where the router reports the catalog going away and
// coming back; l must not be nil (to discard, pass
// slog.New(slog.DiscardHandler)). Without it, slog.Default().
func WithLogger(l *slog.Logger) RouterOption {
	return func(o *routerOptions) error {
		if l == nil {
			return errors.New("shardmgr: WithLogger(nil): want a logger (slog.New(slog.DiscardHandler) to discard)")
		}
		o.log = l
		return nil
	}
}

// WithRetryMoving makes Tx, ReadTx, TxForID, ReadTxForID, Exec and
// QueryRow wait out a move's cut-over instead of returning ErrShardMoving
// at once: they run fn again, on the map reloaded from the catalog, for
// up to wait (and never past ctx), then return the last ErrShardMoving.
// An online move refuses writes for well under a second; a second or two
// covers it, an offline move's copy takes longer. Other errors,
// ErrShardReadOnly included, come back at once. Zero or negative does not
// retry. Without it, no retry.
//
// fn may run more than once: each failed run's transaction was rolled
// back, so fn must not have effects outside it (or must make them safe
// to repeat).
func WithRetryMoving(wait time.Duration) RouterOption {
	return func(o *routerOptions) error { o.retryMoving = wait; return nil }
}
