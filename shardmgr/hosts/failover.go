package hosts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/engine/clusterfile"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
)

// DefaultFailoverMargin is the clock skew between the old primary and
// the manager that a failover's bound allows for by default: verify fails
// a host whose clock is off by more than a second (CheckClock), so five
// is ample for a cluster verify passed.
const DefaultFailoverMargin = 5 * time.Second

// DefaultFailoverLockWait bounds each wait for a shard generator's lock
// on the promoted standby (sessions already writing through it hold the
// shared lock for microseconds).
const DefaultFailoverLockWait = 30 * time.Second

// FailoverOptions adjust Failover. To is required.
type FailoverOptions struct {
	// To is the promoted standby's DSN, as the cluster file is to hold
	// it (the catalog records it without its password).
	To string
	// Margin is added to the bound for the skew between the old
	// primary's clock and the manager's, beyond the lead the catalog
	// recorded. Zero means DefaultFailoverMargin (5s).
	Margin time.Duration
	// LockWait bounds each wait for a generator's lock. Zero means
	// DefaultFailoverLockWait (30s).
	LockWait time.Duration
	// LookupEnv resolves ${VAR} in To (and the rest of the cluster file,
	// read again). Zero means os.LookupEnv, as shardmgr.LoadConfig.
	LookupEnv func(string) (string, bool)
	// Now is the manager's clock. Zero means time.Now.
	Now func() time.Time
	// NewServer accepts at To another server than the recorded one (a
	// system identifier of its own: the host's database restored onto it
	// by pg_dump and pg_restore) in place of the promoted standby; see
	// checkNewServer for what it checks instead.
	NewServer bool
}

// FailoverResult is what a failover did.
type FailoverResult struct {
	Host string `json:"host"`
	// DSN is the new DSN as the catalog records it (no password).
	DSN              string `json:"dsn"`
	SystemIdentifier string `json:"system_identifier"`
	// Timeline is the new server's; RecordedTimeline the old one's, as
	// the catalog had it (null when not recorded).
	Timeline         int64  `json:"timeline"`
	RecordedTimeline *int64 `json:"recorded_timeline"`
	// Bound is the last time the old primary can have put into an id;
	// every shard's next id on the new server carries a later one.
	Bound time.Time `json:"bound"`
	// BoundSource says which of the bounds decided it: BoundClock or
	// BoundReplicated.
	BoundSource string `json:"bound_source"`
	// MarginMS and RecordedLeadMS are the parts of a BoundClock bound
	// beyond the manager's clock.
	MarginMS       int64 `json:"margin_ms"`
	RecordedLeadMS int64 `json:"recorded_lead_ms"`
	// ServerBehindMS is how far the new server's clock is behind the
	// manager's (negative: ahead).
	ServerBehindMS int64 `json:"server_behind_ms"`
	// AdvancedMS is the largest advance of a shard: how far ahead of
	// where its next id would have been it now is.
	AdvancedMS int64          `json:"advanced_ms"`
	Shards     []ShardAdvance `json:"shards"`
	// Generation is the catalog's generation that records the new server.
	Generation int64 `json:"generation"`
	// ClusterFile: the cluster file was rewritten (false when it already
	// named To).
	ClusterFile bool `json:"cluster_file"`
	// NewServer: the host moved to another server (FailoverOptions.NewServer),
	// whose system identifier replaced RecordedSystemIdentifier.
	NewServer                bool   `json:"new_server"`
	RecordedSystemIdentifier string `json:"recorded_system_identifier"`
}

// The sources of a failover's bound.
const (
	// BoundClock: the manager's clock when the failover ran (the old
	// primary is gone, so it handed out nothing later by its own clock),
	// plus the margin and the lead of its clock the catalog recorded.
	BoundClock = "clock"
	// BoundReplicated: a counter replicated to the new server is ahead of
	// that (the old primary's clock ran further ahead than recorded).
	BoundReplicated = "replicated-counter"
)

// ShardAdvance is one shard's counter on the new server.
type ShardAdvance struct {
	Shard  int    `json:"shard"`
	Schema string `json:"schema"`
	// Before is the id the generator would have handed out next (its
	// counter, or the server's clock if later); After the one it hands
	// out next now.
	Before int64 `json:"before"`
	After  int64 `json:"after"`
	// AdvancedMS is After's time less Before's (0: already past).
	AdvancedMS int64 `json:"advanced_ms"`
}

// Failover points host name at the promoted standby opts.To of its
// server. It checks that opts.To is that standby, promoted (same system
// identifier as the catalog recorded, out of recovery, a newer timeline,
// its own record naming this cluster and host, owned by the toolkit's
// role or a superuser, and the host's secret, whose hash the catalog
// records: shardmgr.ErrHostUnproven otherwise), and that no move of the
// host's shards is unfinished; then it advances every shard's counter on
// it past the bound (docs/uniqueness.md#failover), and only then records
// the new server in the catalog (a new generation, which routers follow)
// and its DSN in the cluster file, together, as SetDSN does (a failed
// change leaves both as they were). The old primary must be down (or a
// standby): while the host's old DSN answers as a primary, Failover
// refuses (ErrOldServerWritable); the command cannot stop it. A DSN that
// reaches a connection pooler is refused before anything is checked
// (shardmgr.ErrPooler, as SetDSN: a pooler is the host's app_dsn).
//
// With opts.NewServer, opts.To is instead the host's database restored
// onto another server (checkNewServer): the counters are advanced the same
// way, and the new server's identity recorded with its DSN.
//
// It must never record a new server for a host before that server's
// counters are past the old primary's bound, nor move a counter back.
func Failover(ctx context.Context, c *cluster.Cluster, name string, opts FailoverOptions) (*FailoverResult, error) {
	cfg := c.Config()
	if _, ok := cfg.Host(name); !ok {
		return nil, fmt.Errorf("host %s: %w (not in the cluster file %s)", name, shardmgr.ErrUnknownHost, cfg.Path)
	}
	if opts.To == "" {
		return nil, errors.New("failover: no DSN for the new server")
	}
	if opts.Margin == 0 {
		opts.Margin = DefaultFailoverMargin
	}
	if opts.Margin < 0 {
		return nil, fmt.Errorf("failover: negative margin %s", opts.Margin)
	}
	if opts.LockWait <= 0 {
		opts.LockWait = DefaultFailoverLockWait
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	catPool, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	m, err := c.Map(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	rec, err := catalog.ReadHostIdentity(ctx, catPool, name, false)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if rec.SystemIdentifier == nil {
		return nil, fmt.Errorf("host %s: %w", name, ErrNotIdentified)
	}
	moves, err := catalog.HostMoves(ctx, catPool, name)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	// A retired copy is no obstacle: it failed over with the rest of the
	// host's database.
	if open, _ := describeMoves(moves); len(open) > 0 {
		return nil, fmt.Errorf("host %s: %w: %s", name, ErrHostMoving, strings.Join(open, ", "))
	}
	// The cluster file's edit is prepared (and the new DSN checked as the
	// file will hold it) before anything changes.
	edit, err := clusterfile.SetHost(cfg.Path, name, "dsn", opts.To, opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	nh, _ := edit.Config.Host(name)
	oh, _ := cfg.Host(name)
	// As set-dsn: a pooler in front of the new server would pass the
	// checks below and then break every operator command after it.
	if err := pg.RefusePooler(ctx, nh.DSN, DefaultProbeTimeout); err != nil {
		return nil, fmt.Errorf("host %s: new server: %w", name, err)
	}

	conn, err := connect(ctx, nh.DSN, DefaultProbeTimeout)
	if err != nil {
		return nil, fmt.Errorf("host %s: new server: %w: %s", name, ErrUnreachable, pg.OneLine(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	t0 := opts.Now()
	id, err := pg.ReadServerIdentity(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("host %s: new server: %w", name, err)
	}
	if opts.NewServer {
		err = checkNewServer(ctx, conn, cfg.Cluster, name, rec, id)
	} else {
		err = checkPromotedStandby(ctx, conn, cfg.Cluster, name, rec, id)
	}
	if err == nil {
		err = checkOldStopped(ctx, conn, oh.DSN)
	}
	if err == nil {
		err = checkSecret(ctx, catPool, conn, name)
	}
	if err != nil {
		return nil, pg.OnHost(name, err)
	}

	res := &FailoverResult{
		Host: name, DSN: nh.CatalogDSN(),
		SystemIdentifier: id.SystemIdentifier, Timeline: id.Timeline, RecordedTimeline: rec.Timeline,
		MarginMS: opts.Margin.Milliseconds(), ServerBehindMS: t0.Sub(id.Now).Milliseconds(),
		NewServer: opts.NewServer, RecordedSystemIdentifier: *rec.SystemIdentifier,
	}
	if rec.ClockAheadMS != nil {
		res.RecordedLeadMS = *rec.ClockAheadMS
	}
	if err := advanceCounters(ctx, conn, m, name, opts, res); err != nil {
		return nil, fmt.Errorf("host %s: new server: %w", name, err)
	}

	// The counters are past the bound: from here on the new server may
	// take writes, and the catalog may send them there.
	ahead := pg.ClockAhead(t0, id.Now)
	what := fmt.Sprintf("failover host %s to timeline %d (ids advanced %d ms past the old primary's bound)", name, id.Timeline, res.AdvancedMS)
	if opts.NewServer {
		what = fmt.Sprintf("move host %s to a new server, system identifier %s (ids advanced %d ms past the old server's bound)", name, id.SystemIdentifier, res.AdvancedMS)
	}
	done, err := change(ctx, catPool, m.Generation, edit, func(tx pgx.Tx, _ *shardmgr.ShardMap) (string, error) {
		now, err := catalog.ReadHostIdentity(ctx, tx, name, true)
		if err != nil {
			return "", err
		}
		if !samePtr(now.SystemIdentifier, rec.SystemIdentifier) || !samePtr(now.Timeline, rec.Timeline) {
			return "", fmt.Errorf("host %s: its record changed while the failover ran (another failover?); run it again", name)
		}
		return what, catalog.FailOverHost(ctx, tx, name, res.DSN, id, ahead)
	})
	if err != nil {
		return nil, fmt.Errorf("catalog change (%s): %w", what, err)
	}
	res.Generation, res.ClusterFile = done.Generation, done.File
	return res, nil
}

// checkPromotedStandby refuses a new server that is not the promoted
// standby of the host's recorded server.
func checkPromotedStandby(ctx context.Context, conn *pgx.Conn, clusterName, name string, rec catalog.HostIdentity, id pg.ServerIdentity) error {
	if id.InRecovery {
		return fmt.Errorf("%w: it is a standby, not promoted yet", ErrNotPromoted)
	}
	if id.SystemIdentifier != *rec.SystemIdentifier {
		return fmt.Errorf("%w: %w: its system identifier is %s, the host's server's %s (a standby made from it by pg_basebackup shares it; a server the database was restored onto by pg_restore does not)", ErrNotStandbyOf, ErrAnotherServer, id.SystemIdentifier, *rec.SystemIdentifier)
	}
	if rec.Timeline != nil && id.Timeline <= *rec.Timeline {
		return fmt.Errorf("%w: it is on timeline %d, not newer than the host's server's %d: it was not promoted since (the old primary itself, or a copy of it?)", ErrNotStandbyOf, id.Timeline, *rec.Timeline)
	}
	return checkHostRecord(ctx, conn, clusterName, name)
}

// checkHostRecord refuses a new server whose database does not record
// itself (shardid.host_info) as host name of this cluster.
func checkHostRecord(ctx context.Context, conn *pgx.Conn, clusterName, name string) error {
	gotCluster, gotHost, err := hostidentity.ReadInfo(ctx, conn)
	if err != nil {
		return fmt.Errorf("new server: read its record: %w", err)
	}
	if gotCluster != clusterName || gotHost != name {
		return fmt.Errorf("%w: its database records cluster %q host %q, not cluster %q host %q (is the DSN's database the host's?)", ErrNotStandbyOf, gotCluster, gotHost, clusterName, name)
	}
	return nil
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
