package shardmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// A host's app_dsn (Host.AppDSN) is the applications' own way to its
// database, usually through a connection pooler, which the operators'
// commands never use. The catalog still decides where a host is: each
// map the router reads is checked against what the database behind each
// app_dsn says of itself (the cluster and host it records in
// shardid.host_info, and its server's system identifier and timeline,
// which the catalog records for the host), so that an app_dsn left
// pointing at the old primary after a failover, or at another host's
// database, is refused rather than written to.

// ErrAppDSN: a host's app_dsn does not reach the database the catalog
// names for the host; see *AppDSNError. The router refuses the host's
// shards until it does.
var ErrAppDSN = errors.New("app_dsn does not reach the host's database")

// AppDSNError says how a host's app_dsn differs from the catalog's host.
type AppDSNError struct {
	Host string
	// Reason says what the database behind app_dsn answered.
	Reason string
}

func (e *AppDSNError) Error() string {
	return fmt.Sprintf("host %s: %v: %s", e.Host, ErrAppDSN, e.Reason)
}

func (e *AppDSNError) Unwrap() error { return ErrAppDSN }

// poolerProbeTimeout bounds the probe of an app_dsn for a pooler, and
// the identity check through it: a host that does not answer is routed
// (and fails) as any unreachable host.
const poolerProbeTimeout = 10 * time.Second

// adaptToPooler makes a pool opened on an app_dsn work through a
// connection pooler with pgx's defaults: a pooler in transaction mode
// hands each transaction to any server connection, where the named
// prepared statements of pgx's statement cache do not exist (or exist
// already), so the pool runs every query unprepared, in one round trip
// (QueryExecModeExec). A DSN that names default_query_exec_mode is left
// as it says; a probe that fails assumes a pooler (exec mode works on
// PostgreSQL too).
func (r *Router) adaptToPooler(ctx context.Context, host, dsn string, cfg *pgxpool.Config) {
	if dsnSets(dsn, "default_query_exec_mode") {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, poolerProbeTimeout)
	defer cancel()
	pc := cfg.ConnConfig.Config.Copy()
	if pc.ConnectTimeout == 0 || pc.ConnectTimeout > poolerProbeTimeout {
		pc.ConnectTimeout = poolerProbeTimeout
	}
	pooled, err := pgsession.IsPooler(pctx, pc)
	switch {
	case err != nil:
		r.opts.log.Warn("shardid router: cannot tell whether the host's app_dsn is a connection pooler; running its queries unprepared", "host", host, "err", err)
	case pooled:
		r.opts.log.Info("shardid router: the host's app_dsn is a connection pooler; running its queries unprepared (QueryExecModeExec)", "host", host)
	default:
		return
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
}

// dsnSets reports whether dsn (a URL or keyword/value text) gives the
// setting key, as parsed: pgconn keeps the settings it does not know
// (pgx's and pgxpool's, such as pool_max_conns) among the runtime
// parameters. A test of the text would take the key inside a password
// or an application_name for the setting.
func dsnSets(dsn, key string) bool {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return false
	}
	_, ok := cfg.RuntimeParams[key]
	return ok
}

// appDSNInfo is what the database behind an app_dsn records of itself.
const appDSNInfo = `SELECT cluster, host FROM shardid.host_info`

// checkAppDSNs checks, for every host of m the router reaches through an
// app_dsn (pools), that the database there is the one the catalog names:
// it records itself as that host of m's cluster, and its server has the
// system identifier and timeline the catalog recorded for the host. It
// returns the hosts to refuse, by name. What the routing role may not
// read is not judged (logged once).
func (r *Router) checkAppDSNs(ctx context.Context, m *ShardMap, pools map[string]*pgxpool.Pool) map[string]error {
	if len(pools) == 0 {
		return nil
	}
	type recorded struct {
		sysID    *string
		timeline *int64
	}
	rec := map[string]recorded{}
	cctx, cancel := context.WithTimeout(ctx, poolerProbeTimeout)
	rows, err := r.catalog.Query(cctx, `SELECT name, system_identifier, timeline FROM shardid.hosts`)
	if err == nil {
		for rows.Next() {
			var name string
			var x recorded
			if err = rows.Scan(&name, &x.sysID, &x.timeline); err != nil {
				break
			}
			rec[name] = x
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	cancel()
	if err != nil {
		// An older catalog records no identity (schema before 15): the
		// host record check below still runs.
		r.opts.log.Debug("shardid router: hosts' recorded identities not read", "err", err)
	}
	refused := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range pools {
		if _, ok := m.Host(name); !ok {
			continue
		}
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, poolerProbeTimeout)
			defer cancel()
			reason, err := appDSNReason(hctx, p, m.Cluster, name, rec[name].sysID, rec[name].timeline)
			if err != nil {
				r.unreadableAppDSN(name, err)
				return
			}
			if reason != "" {
				mu.Lock()
				refused[name] = &AppDSNError{Host: name, Reason: reason}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(refused) == 0 {
		return nil
	}
	return refused
}

// appDSNReason asks the database behind p who it is and says how that
// differs from host name of cluster with the recorded identity; "" when
// it does not. An error is a question it could not ask.
func appDSNReason(ctx context.Context, p *pgxpool.Pool, cluster, name string, sysID *string, timeline *int64) (string, error) {
	var gotCluster, gotHost string
	err := p.QueryRow(ctx, appDSNInfo).Scan(&gotCluster, &gotHost)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "the database there records no shardid host", nil
	case isDenied(err):
		// Not readable by this role: the server's identity still tells.
	case pg.IsUndefinedTable(err) || isNoSchema(err):
		return "the database there has no shardid host record (shardid.host_info)", nil
	case err != nil:
		return "", err
	case gotCluster != cluster || gotHost != name:
		return fmt.Sprintf("the database there records itself as host %s of cluster %s", gotHost, gotCluster), nil
	}
	if sysID == nil || timeline == nil {
		return "", nil
	}
	id, err := pg.ReadServerIdentity(ctx, p)
	if errors.Is(err, pg.ErrIdentityDenied) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case id.SystemIdentifier != *sysID:
		return fmt.Sprintf("its server has system identifier %s, the catalog recorded %s for the host's server (another server)", id.SystemIdentifier, *sysID), nil
	case id.Timeline != *timeline:
		return fmt.Sprintf("its server is on timeline %d, the catalog recorded %d for the host's server (the old primary, or a standby promoted without a failover)", id.Timeline, *timeline), nil
	}
	return "", nil
}

func isDenied(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.InsufficientPrivilege
}

func isNoSchema(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.InvalidSchemaName
}

// unreadableAppDSN logs, once per host and router, an app_dsn whose
// database could not be asked who it is: its shards are routed as the
// catalog says.
func (r *Router) unreadableAppDSN(host string, err error) {
	if _, warned := r.appWarned.LoadOrStore(host, true); warned {
		return
	}
	r.opts.log.Warn("shardid router: cannot check that the host's app_dsn reaches the database the catalog names", "host", host, "err", err)
}

// fileDSNIgnored logs, once per host, that the router uses the catalog's
// DSN for a host whose cluster-file dsn: names another: the catalog
// decides where a host is, and an application that wants another way
// there (a connection pooler) says so with app_dsn:. Silently writing
// through the catalog's DSN hid a file pointed elsewhere (issue 28).
func (r *Router) fileDSNIgnored(host, catalogDSN string) {
	if _, warned := r.dsnWarned.LoadOrStore(host, true); warned {
		return
	}
	r.opts.log.Warn("shardid router: the host's dsn: in the cluster file is not the catalog's; routing through the catalog's DSN (the catalog decides where a host is). "+
		"To route the applications another way, through a connection pooler say, give the host app_dsn: in the cluster file", "host", host, "dsn", pg.StripPassword(catalogDSN))
}

// noteAppDSNsLocked installs the hosts refused by checkAppDSNs (mu held)
// and logs a change.
func (r *Router) noteAppDSNsLocked(refused map[string]error) {
	for name, err := range refused {
		if r.appRefused[name] == nil || r.appRefused[name].Error() != err.Error() {
			r.opts.log.Error("shardid router: refusing the host's shards: its app_dsn does not reach the database the catalog names", "host", name, "err", err)
		}
	}
	for name := range r.appRefused {
		if refused[name] == nil {
			r.opts.log.Info("shardid router: the host's app_dsn reaches the catalog's database again", "host", name)
		}
	}
	r.appRefused = refused
}

// refuseAppDSN refuses shard s when its host's app_dsn reaches another
// database than the catalog's (reads too: they would read another
// database's rows).
func (r *Router) refuseAppDSN(s Shard) error {
	r.mu.RLock()
	err := r.appRefused[s.Host]
	r.mu.RUnlock()
	if err == nil {
		return nil
	}
	return &ShardError{Shard: s.ID, Host: s.Host, Err: err}
}

// appPools are the pools of pools opened on an app_dsn.
func (r *Router) appPools(pools map[string]*pgxpool.Pool) map[string]*pgxpool.Pool {
	out := map[string]*pgxpool.Pool{}
	for name, p := range pools {
		if fh, ok := r.files[name]; ok && fh.AppDSN != "" && p != nil {
			out[name] = p
		}
	}
	return out
}

// AppDSNRefused returns the hosts whose app_dsn the router's last check
// found reaching another database than the catalog's, sorted.
func (r *Router) AppDSNRefused() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for name := range r.appRefused {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
