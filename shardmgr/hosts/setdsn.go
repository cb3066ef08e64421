package hosts

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/engine/clusterfile"
)

// SetDSNResult is what SetDSN did. JSON:
// {"host":"pg2","old_dsn":"...","new_dsn":"...","changed":true,"old_answered":false,"server":{...},"generation":N}.
type SetDSNResult struct {
	Host string `json:"host"`
	// OldDSN and NewDSN are without their passwords.
	OldDSN string `json:"old_dsn"`
	NewDSN string `json:"new_dsn"`
	// Changed is false when the host already had this DSN.
	Changed bool `json:"changed"`
	// OldAnswered: the old address still answered, and was checked to be
	// the same database (same system identifier and database name).
	OldAnswered bool `json:"old_answered"`
	// Server is what the new server said about itself.
	Server *Server `json:"server"`
	// Generation is the catalog's generation after the change.
	Generation int64 `json:"generation"`
	// Config is the cluster file as it reads now.
	Config *shardmgr.Config `json:"-"`
}

// SetDSNOptions adjust SetDSN.
type SetDSNOptions struct {
	// ProbeTimeout bounds the connection to each of the new and the old
	// address and the questions asked there. Zero means
	// DefaultProbeTimeout (20s).
	ProbeTimeout time.Duration
	// LookupEnv resolves ${VAR} in the new DSN (and the rest of the
	// cluster file, read again). Zero means os.LookupEnv, as
	// shardmgr.LoadConfig.
	LookupEnv func(string) (string, bool)
}

// SetDSN points host name at dsn, in the catalog (one change, generation
// bumped) and in the cluster file (the host's dsn: edited in place), once
// the server there proves to be the host's database or its promoted
// standby, by what the servers say:
//   - dsn reaches PostgreSQL itself, not a connection pooler
//     (shardmgr.ErrPooler: a pooler is the host's app_dsn);
//   - the database at dsn records itself (shardid.host_info) as host name
//     of this cluster, so it is no other host's database;
//   - the server at dsn is not in recovery (a standby is promoted first);
//   - when the old address still answers, both report the same system
//     identifier (a standby made by pg_basebackup shares it) and the same
//     database name, and the old server, if it still accepts writes, is
//     the very database the new address reaches: two primaries of one host
//     are refused;
//   - its database holds the host's secret, whose hash the catalog
//     records, and its record belongs to the toolkit's role or a
//     superuser (shardmgr.ErrHostUnproven otherwise): a record another
//     role forged in a database of its own is refused;
//   - it is the very server the catalog recorded for the host: the same
//     system identifier, on the recorded timeline. A newer timeline (a
//     promoted standby) is ErrNeedsFailover: Failover advances the
//     counters first. Another system identifier is another server,
//     refused as verify fails it; a host whose identity the catalog has
//     not recorded yet is ErrNotIdentified (init records it).
//
// Bad input (an unknown host, a DSN that does not parse, a server that does
// not answer) is an error and nothing changes. c keeps the cluster file it
// was opened with; the result's Config is the file as it reads now.
func SetDSN(ctx context.Context, c *cluster.Cluster, name, dsn string, opts SetDSNOptions) (*SetDSNResult, error) {
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	cfg := c.Config()
	old, ok := cfg.Host(name)
	if !ok {
		return nil, fmt.Errorf("host %s: %w (not in the cluster file %s)", name, shardmgr.ErrUnknownHost, cfg.Path)
	}
	cat, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	m, err := shardmgr.ReadMap(ctx, cat)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	ch, ok := m.Host(name)
	if !ok {
		return nil, fmt.Errorf("host %s: %w (in the cluster file, not in the catalog: run init)", name, shardmgr.ErrUnknownHost)
	}
	edit, err := clusterfile.SetHost(cfg.Path, name, "dsn", dsn, opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	nh, _ := edit.Config.Host(name)
	res := &SetDSNResult{Host: name, OldDSN: old.CatalogDSN(), NewDSN: nh.CatalogDSN(), Config: edit.Config, Generation: m.Generation}
	// A pooler would pass every check below (it reaches the host's
	// database) and then break every command that needs PostgreSQL
	// itself, the set-dsn back included.
	if err := pg.RefusePooler(ctx, nh.DSN, opts.ProbeTimeout); err != nil {
		return nil, fmt.Errorf("host %s: new DSN: %w", name, err)
	}

	newConn, err := connect(ctx, nh.DSN, opts.ProbeTimeout)
	if err != nil {
		return nil, fmt.Errorf("host %s: new DSN: %w: %s", name, ErrUnreachable, pg.OneLine(err))
	}
	defer newConn.Close(context.WithoutCancel(ctx))
	pctx, cancel := context.WithTimeout(ctx, opts.ProbeTimeout)
	defer cancel()
	if res.Server, err = identify(pctx, newConn); err != nil {
		return nil, fmt.Errorf("host %s: new DSN: %w", name, err)
	}
	ns := res.Server
	switch {
	case ns.Cluster == "":
		return nil, fmt.Errorf("host %s: %w: the database at the new DSN (%s on %s) records no shardid host", name, ErrNotSameDatabase, ns.Database, ns.Address)
	case ns.Cluster != cfg.Cluster || ns.Host != name:
		return nil, fmt.Errorf("host %s: %w: the database at the new DSN (%s on %s) records itself as host %s of cluster %s", name, ErrNotSameDatabase, ns.Database, ns.Address, ns.Host, ns.Cluster)
	case ns.Role != RolePrimary:
		return nil, fmt.Errorf("host %s: %w: the server at the new DSN (%s) is a standby, in recovery: promote it first", name, ErrNotSameDatabase, ns.Address)
	}
	if err := checkOld(pctx, old.DSN, newConn, res, opts.ProbeTimeout); err != nil {
		return nil, pg.OnHost(name, err)
	}
	if err := checkRecorded(ctx, cat, name, ns); err != nil {
		return nil, pg.OnHost(name, err)
	}
	if err := checkSecret(ctx, cat, newConn, name); err != nil {
		return nil, fmt.Errorf("host %s: the database at the new DSN (%s on %s): %w", name, ns.Database, ns.Address, err)
	}
	// Nothing to do only when both the file and the catalog have it (a
	// file edited by hand before, without init, still updates the
	// catalog).
	if !edit.Changes() && ch.DSN == nh.CatalogDSN() {
		return res, nil
	}
	done, err := change(ctx, cat, 0, edit, func(tx pgx.Tx, m *shardmgr.ShardMap) (string, error) {
		if h, ok := m.Host(name); ok && h.DSN == nh.CatalogDSN() {
			return "", nil
		}
		return fmt.Sprintf("host %s: new DSN", name), catalog.SetHostDSN(ctx, tx, name, nh.CatalogDSN())
	})
	if err != nil {
		return nil, err
	}
	res.Changed, res.Generation = done.Catalog || done.File, done.Generation
	return res, nil
}

// checkRecorded refuses a new server that is not the one the catalog
// recorded for the host: on a newer timeline it is a promoted standby (or
// a backup restored to a point in time), whose counters stop where its
// replay did, so that ids the old primary handed out after that would
// come again (docs/uniqueness.md#failover); with another system
// identifier it is another server altogether, whose counters nothing
// ties to the recorded one's (verify fails such a host).
func checkRecorded(ctx context.Context, cat pg.Querier, name string, ns *Server) error {
	rec, err := catalog.ReadHostIdentity(ctx, cat, name, false)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	switch {
	case ns.SystemID == "":
		return fmt.Errorf("%w: cannot tell whether the server at the new DSN (%s) is the recorded one", pg.ErrIdentityDenied, ns.Address)
	case rec.SystemIdentifier == nil || rec.Timeline == nil:
		return ErrNotIdentified
	case *rec.SystemIdentifier != ns.SystemID:
		return fmt.Errorf("%w: %w: the server at the new DSN (%s) has system identifier %s, the catalog recorded %s for the host's server: another server, whose counters may be behind ids the recorded one handed out",
			ErrNotSameDatabase, ErrAnotherServer, ns.Address, ns.SystemID, *rec.SystemIdentifier)
	case ns.Timeline > *rec.Timeline:
		return fmt.Errorf("%w: the server at the new DSN (%s) is on timeline %d, the catalog recorded %d for the host's server: it was promoted (or restored) since, and may lack ids the old primary handed out",
			ErrNeedsFailover, ns.Address, ns.Timeline, *rec.Timeline)
	}
	return nil
}

// connect opens one connection on dsn, waiting at most timeout.
func connect(ctx context.Context, dsn string, timeout time.Duration) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pg.Connect(ctx, dsn)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	return conn, err
}

// checkOld compares the old address, if it still answers, with the new
// server (newConn, which res.Server describes).
func checkOld(ctx context.Context, oldDSN string, newConn *pgx.Conn, res *SetDSNResult, timeout time.Duration) error {
	oldConn, err := connect(ctx, oldDSN, timeout)
	if err != nil {
		return nil // gone: the usual case after a failover
	}
	defer oldConn.Close(context.WithoutCancel(ctx))
	was, err := identify(ctx, oldConn)
	if err != nil {
		return fmt.Errorf("old DSN answers, but: %w", err)
	}
	res.OldAnswered = true
	ns := res.Server
	if was.SystemID != "" && ns.SystemID != "" && was.SystemID != ns.SystemID {
		return fmt.Errorf("%w: the old address still answers (%s) with system identifier %s, the new one (%s) with %s: another server, not a copy of this host's",
			ErrNotSameDatabase, was.Address, was.SystemID, ns.Address, ns.SystemID)
	}
	if was.Database != ns.Database {
		return fmt.Errorf("%w: the old address still answers (%s) with database %s, the new one (%s) with %s",
			ErrNotSameDatabase, was.Address, was.Database, ns.Address, ns.Database)
	}
	if was.Role != RolePrimary {
		return nil // the old primary now follows: one writer
	}
	same, err := sameDatabase(ctx, oldConn, newConn)
	if err != nil {
		return fmt.Errorf("compare the old and the new server: %w", err)
	}
	if !same {
		return fmt.Errorf("%w: the old address (%s) still accepts writes as a primary, beside the new one (%s): stop it (or make it a standby) before pointing the host elsewhere",
			ErrNotSameDatabase, was.Address, ns.Address)
	}
	return nil
}

// sameDatabase reports whether a and b are connections to one database
// of one server (not copies): a takes a transaction advisory lock, and b
// looks for it among its own database's locks. Nothing is written; the
// lock goes with the transaction.
func sameDatabase(ctx context.Context, a, b *pgx.Conn) (bool, error) {
	// A random first key, below the 'shid' classes of shardid's own
	// locks, so that anyone else's lock is not taken for this one.
	class := int32(rand.N(1<<30)) + 1
	tx, err := a.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_xact_lock($1, 0)`, class).Scan(&ok); err != nil || !ok {
		return false, errors.Join(err, errors.New("the probe's lock is taken"))
	}
	var seen bool
	err = b.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l
		WHERE l.locktype = 'advisory' AND l.classid = $1::oid AND l.objid = 0 AND l.objsubid = 2 AND l.granted
		  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()))`,
		int64(class)).Scan(&seen)
	return seen, err
}
