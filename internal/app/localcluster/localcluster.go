package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
)

// quietHandle keeps the cluster handle's own lines (retried connects, the
// phases of work given no Logger) off the command's output: it reports
// what it did itself.
var quietHandle = cluster.WithLogger(slog.New(slog.DiscardHandler))

// Defaults for zero Options fields.
const (
	DefaultDir    = ".shardid"
	DefaultHosts  = 3
	DefaultShards = 64
)

// Settings are what online moves (logical replication between the
// servers) need on top of localpg's defaults: enough slots, senders and
// workers for several moves at once, and a short retry interval so that a
// subscription's worker starts again quickly after an error.
var Settings = map[string]string{
	"wal_level":                       "logical",
	"max_replication_slots":           "20",
	"max_wal_senders":                 "20",
	"max_logical_replication_workers": "8",
	"max_worker_processes":            "16",
	"wal_retrieve_retry_interval":     "200ms",
}

// Options of every operation. Zero values mean the defaults above;
// Config empty means the file Up wrote, or shardmgr.DefaultConfigPath for
// a new cluster.
type Options struct {
	Dir    string
	Config string
	Hosts  int // servers Up starts for a new cluster
	Shards int // logical shards of a new cluster
	// BinDir holds the PostgreSQL binaries; empty means localpg's search.
	BinDir string
	// Logger receives Init's messages; nil discards them.
	Logger *slog.Logger
}

// Server is one local server.
type Server struct {
	Name    string `json:"name"`
	Port    int    `json:"port"`
	Dir     string `json:"dir"`
	DSN     string `json:"dsn"` // of its app database
	Running bool   `json:"running"`
	PID     int    `json:"pid,omitempty"`
	// Created and Started say what this call did: created the server, or
	// started it again after it had stopped.
	Created bool `json:"created,omitempty"`
	Started bool `json:"started,omitempty"`
}

// Cluster is the local cluster as found on disk.
type Cluster struct {
	Dir     string   `json:"dir"`
	Config  string   `json:"config"`
	Servers []Server `json:"servers"`
}

// UpResult is what Up did.
type UpResult struct {
	Cluster
	// ConfigWritten is true when this call wrote the cluster file.
	ConfigWritten bool `json:"config_written"`
	// Databases lists the databases of the cluster file this call created
	// or closed to PUBLIC (CONNECT revoked), as "pg1/shardid_catalog
	// (created, CONNECT revoked)"; empty when they were already.
	Databases []string `json:"databases"`
	// Init is install.Init's result (nothing to do on a second Up).
	Init *install.InitResult `json:"init"`
}

// databasesTimeout bounds closeDatabases: a few statements on local
// servers, generous for a loaded machine.
const databasesTimeout = 2 * time.Minute

// closeDatabasesWithin is closeDatabases bounded by databasesTimeout.
func closeDatabasesWithin(ctx context.Context, path string, servers []Server) ([]string, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, databasesTimeout,
		fmt.Errorf("creating the cluster file's databases and revoking CONNECT from PUBLIC took over %s", databasesTimeout))
	defer cancel()
	done, err := closeDatabases(ctx, path, servers)
	if err != nil && context.Cause(ctx) != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return done, err
}

// ErrNoCluster is returned (wrapped) when Dir holds no local cluster.
var ErrNoCluster = errors.New("no local cluster here")

// state is local.json.
type state struct {
	Config string   `json:"config"`
	Wrote  bool     `json:"config_written"`
	Shards int      `json:"shards"`
	Names  []string `json:"servers"`
}

const stateName = "local.json"

func (o *Options) defaults() error {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.Hosts <= 0 {
		o.Hosts = DefaultHosts
	}
	if o.Shards <= 0 {
		o.Shards = DefaultShards
	}
	var err error
	o.Dir, err = filepath.Abs(o.Dir)
	return err
}

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s (run shardid local up)", ErrNoCluster, dir)
	}
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateName), err)
	}
	return &st, nil
}

func writeState(dir string, st *state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, stateName), append(b, '\n'), 0o644)
}

func (o Options) pgOptions() localpg.Options {
	return localpg.Options{BinDir: o.BinDir, Settings: Settings}
}

func describe(name string, s *localpg.Server) Server {
	pid, running := s.PID()
	if !running {
		pid = 0
	}
	return Server{Name: name, Port: s.Port, Dir: s.Dir, DSN: s.DSN("app"), Running: running, PID: pid}
}

// Up starts the local cluster in opts.Dir: on the first call it creates
// opts.Hosts servers, writes the cluster file and initialises opts.Shards
// logical shards; later calls start the servers that are stopped and run
// Init again, which finds nothing to do. It refuses to overwrite a cluster
// file it did not write.
func Up(ctx context.Context, opts Options) (*UpResult, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	st, err := readState(opts.Dir)
	if errors.Is(err, ErrNoCluster) {
		st, err = newState(opts)
	}
	if err != nil {
		return nil, err
	}
	if opts.Config != "" {
		if abs, _ := filepath.Abs(opts.Config); abs != st.Config {
			return nil, fmt.Errorf("the local cluster in %s writes its cluster file to %s, not %s (shardid local down --purge starts afresh)", opts.Dir, st.Config, abs)
		}
	}
	if !st.Wrote {
		if _, err := os.Stat(st.Config); err == nil {
			return nil, fmt.Errorf("%s exists and is not this local cluster's: remove it or choose another file with --write-config", st.Config)
		}
	}
	// Reachable by the postgres user when we are root (localpg checks the
	// directories above).
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeState(opts.Dir, st); err != nil {
		return nil, err
	}

	res := &UpResult{Cluster: Cluster{Dir: opts.Dir, Config: st.Config, Servers: make([]Server, len(st.Names))}}
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range st.Names {
		g.Go(func() error {
			srv, err := ensureServer(gctx, filepath.Join(opts.Dir, name), opts.pgOptions())
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res.Servers[i] = srv
			res.Servers[i].Name = name
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	if _, err := os.Stat(st.Config); errors.Is(err, os.ErrNotExist) {
		if err := writeConfig(st.Config, st.Shards, res.Servers); err != nil {
			return nil, err
		}
		res.ConfigWritten = true
		if !st.Wrote {
			st.Wrote = true
			if err := writeState(opts.Dir, st); err != nil {
				return nil, err
			}
		}
	}
	// Before init, so that it finds the catalog closed to PUBLIC.
	if res.Databases, err = closeDatabasesWithin(ctx, st.Config, res.Servers); err != nil {
		return nil, err
	}
	if res.Databases == nil {
		res.Databases = []string{}
	}
	cfg, err := shardmgr.LoadConfig(st.Config)
	if err != nil {
		return nil, err
	}
	c, err := cluster.Open(ctx, cfg, quietHandle)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	res.Init, err = install.Init(ctx, c, install.InitOptions{Logger: opts.Logger})
	if err != nil {
		return res, fmt.Errorf("init: %w", err)
	}
	return res, nil
}

func newState(opts Options) (*state, error) {
	cfg := opts.Config
	if cfg == "" {
		cfg = shardmgr.DefaultConfigPath
	}
	cfg, err := filepath.Abs(cfg)
	if err != nil {
		return nil, err
	}
	st := &state{Config: cfg, Shards: opts.Shards}
	for i := range opts.Hosts {
		st.Names = append(st.Names, fmt.Sprintf("pg%d", i+1))
	}
	return st, nil
}

// ensureServer creates the server in dir, or starts it when it is
// stopped, or finds it running.
func ensureServer(ctx context.Context, dir string, opts localpg.Options) (Server, error) {
	s, err := localpg.Open(dir, opts)
	if errors.Is(err, localpg.ErrNoServer) {
		if s, err = localpg.StartDetached(ctx, dir, opts); err != nil {
			return Server{}, err
		}
		srv := describe("", s)
		srv.Created = true
		return srv, nil
	}
	if err != nil {
		return Server{}, err
	}
	if s.Running() {
		return describe("", s), nil
	}
	if err := s.Restart(ctx); err != nil {
		return Server{}, err
	}
	srv := describe("", s)
	srv.Started = true
	return srv, nil
}

// Status returns the local cluster's servers and whether each runs.
func Status(opts Options) (*Cluster, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	st, err := readState(opts.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, Config: st.Config}
	for _, name := range st.Names {
		s, err := localpg.Open(filepath.Join(opts.Dir, name), opts.pgOptions())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.Servers = append(c.Servers, describe(name, s))
	}
	return c, nil
}

// AddHost starts one more server, appends it to the cluster file's hosts,
// as the README's rebalancing section asks, and runs Init, which records
// the empty host in the catalog; shards move to it with shardid rebalance.
func AddHost(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	st, err := readState(opts.Dir)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("pg%d", len(st.Names)+1)
	for taken(st.Names, name) {
		name += "x"
	}
	srv, err := ensureServer(ctx, filepath.Join(opts.Dir, name), opts.pgOptions())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	srv.Name = name
	st.Names = append(st.Names, name)
	if err := writeState(opts.Dir, st); err != nil {
		return nil, err
	}
	if err := appendHost(st.Config, name, srv.DSN); err != nil {
		return nil, err
	}
	// Init creates the host's database and records it in the catalog, so
	// that verify passes and rebalance sees an empty host.
	cfg, err := shardmgr.LoadConfig(st.Config)
	if err != nil {
		return nil, err
	}
	c, err := cluster.Open(ctx, cfg, quietHandle)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := install.Init(ctx, c, install.InitOptions{Logger: opts.Logger}); err != nil {
		return &srv, fmt.Errorf("init: %w", err)
	}
	return &srv, nil
}

func taken(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// DownResult is what Down did.
type DownResult struct {
	Stopped []string `json:"stopped"`
	// Removed lists the directory and file purge removed.
	Removed []string `json:"removed,omitempty"`
}

// Down stops every server of the local cluster (a fast shutdown: sessions
// are ended, data is kept). With purge it also removes opts.Dir and the
// cluster file Up wrote.
func Down(ctx context.Context, opts Options, purge bool) (*DownResult, error) {
	c, err := Status(opts)
	if err != nil {
		return nil, err
	}
	st, err := readState(c.Dir)
	if err != nil {
		return nil, err
	}
	res := &DownResult{}
	var errs []error
	for _, srv := range c.Servers {
		if !srv.Running {
			continue
		}
		s, err := localpg.Open(srv.Dir, opts.pgOptions())
		if err == nil {
			err = s.Halt()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", srv.Name, err))
			continue
		}
		res.Stopped = append(res.Stopped, srv.Name)
	}
	if err := errors.Join(errs...); err != nil || !purge {
		return res, err
	}
	if st.Wrote {
		if err := os.Remove(st.Config); err != nil && !errors.Is(err, os.ErrNotExist) {
			return res, err
		}
		res.Removed = append(res.Removed, st.Config)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return res, err
	}
	res.Removed = append(res.Removed, c.Dir)
	return res, nil
}

// NextSteps are the commands to try after Up, for the file at config.
func NextSteps(config string) []string {
	flag := ""
	if wd, err := os.Getwd(); err != nil || filepath.Join(wd, shardmgr.DefaultConfigPath) != config {
		flag = " --config " + config
	}
	return []string{
		"shardid status" + flag,
		"shardid verify" + flag,
		"shardid serve" + flag + "    (ids over HTTP from the segments: section)",
		"shardid local add-host    (then: shardid rebalance plan" + flag + ")",
		"shardid local down [--purge]",
	}
}
