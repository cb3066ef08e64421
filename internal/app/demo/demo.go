package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/verify"
)

// quietHandle keeps the cluster handle's own lines (retried connects, the
// phases of work given no Logger) off the command's output: it reports
// what it did itself.
var quietHandle = cluster.WithLogger(slog.New(slog.DiscardHandler))

// Options of a demo run. Zero values mean 3 hosts, 64 shards, 8 sessions
// and 200,000 rows.
type Options struct {
	Hosts    int
	Shards   int
	Sessions int
	Rows     int
}

// Report is what the demo found.
type Report struct {
	Hosts, Shards, Sessions int
	Rows                    int64
	Elapsed                 time.Duration
	IDsPerSec               float64
	RowsPerHost             map[string]int64
	Duplicates              int64
	WrongShard              int64 // ids whose shard bits differ from the shard they are stored in
	Samples                 []Sample
	Verify                  *verify.Report
}

// Sample is one stored id, decoded.
type Sample struct {
	ID    idgen.ID
	Host  string
	Shard int // where it is stored
	Parts idgen.Parts
}

// ErrFailed is returned (wrapped) when the demo finds a duplicate, an id in
// the wrong shard, or a verify problem.
var ErrFailed = errors.New("demo found problems")

// Run runs the demo and writes its progress and report to w.
func Run(ctx context.Context, w io.Writer, opts Options) (*Report, error) {
	if opts.Hosts <= 0 {
		opts.Hosts = 3
	}
	if opts.Shards <= 0 {
		opts.Shards = 64
	}
	if opts.Sessions <= 0 {
		opts.Sessions = 8
	}
	if opts.Rows <= 0 {
		opts.Rows = 200_000
	}
	fmt.Fprintf(w, "starting %d local PostgreSQL servers (the hosts) ...\n", opts.Hosts)
	servers, err := localpg.StartN(ctx, opts.Hosts, localpg.Options{})
	if err != nil {
		return nil, err
	}
	defer localpg.RemoveTemplates()
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	dir, err := os.MkdirTemp("", "shardid-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	// A cluster file like a user's, read back the way the commands read it.
	var file strings.Builder
	fmt.Fprintf(&file, "cluster: demo\nshards: %d\ncatalog: %s\nhosts:\n", opts.Shards, servers[0].DSN("shardid_catalog"))
	for i, s := range servers {
		fmt.Fprintf(&file, "  - name: pg%d\n    dsn: %s\n", i+1, s.DSN("app"))
	}
	path := filepath.Join(dir, "shardid.yaml")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "cluster file %s:\n%s\n", path, indent(file.String()))
	cfg, err := shardmgr.LoadConfig(path)
	if err != nil {
		return nil, err
	}

	c, err := cluster.Open(ctx, cfg, quietHandle)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	fmt.Fprintln(w, "shardid init: catalog, map, a schema and a generator per shard ...")
	res, err := install.Init(ctx, c, install.InitOptions{})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "  created %d databases, installed %d shards in %.2fs (generation %d)\n",
		len(res.CreatedDatabases), res.Installed, res.Elapsed.Seconds(), res.Generation)
	st, err := install.ClusterStatus(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, h := range st.Hosts {
		fmt.Fprintf(w, "  %s holds shards %d-%d (%d)\n", h.Name, h.Shards[0], h.Shards[len(h.Shards)-1], len(h.Shards))
	}

	r, err := shardmgr.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fmt.Fprintln(w, "creating table likes in every shard through the router ...")
	fmt.Fprintln(w, "  CREATE TABLE shard_NNNN.likes (id bigint PRIMARY KEY DEFAULT shard_NNNN.next_id(), user_id bigint, ...)")
	for id := range r.Shards() {
		err := r.Tx(ctx, id, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
			_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
				id bigint PRIMARY KEY DEFAULT %s,
				user_id bigint NOT NULL,
				created_at timestamptz NOT NULL DEFAULT now())`, s.Table("likes"), s.NextID()))
			return err
		})
		if err != nil {
			return nil, err
		}
	}

	rep, err := insert(ctx, w, r, opts)
	if err != nil {
		return nil, err
	}
	rep.Hosts = opts.Hosts

	fmt.Fprintln(w, "shardid verify --deep ...")
	if rep.Verify, err = verify.Verify(ctx, c, verify.Options{Deep: true}); err != nil {
		return nil, err
	}
	printReport(w, rep)
	if rep.Duplicates != 0 || rep.WrongShard != 0 || !rep.Verify.OK {
		return rep, fmt.Errorf("%w: %d duplicate ids, %d ids in the wrong shard, %d verify problems",
			ErrFailed, rep.Duplicates, rep.WrongShard, len(rep.Verify.Problems))
	}
	fmt.Fprintln(w, "stopping the servers and removing their data ...")
	return rep, nil
}

// insert writes opts.Rows likes from opts.Sessions goroutines, each batch
// for one user routed to the user's shard, and checks every id returned.
func insert(ctx context.Context, w io.Writer, r *shardmgr.Router, opts Options) (*Report, error) {
	fmt.Fprintf(w, "inserting %d rows through the router from %d goroutines ...\n", opts.Rows, opts.Sessions)
	const batch = 100
	var (
		mu      sync.Mutex
		seen    = make(map[idgen.ID]int, opts.Rows)
		rep     = &Report{Shards: r.Shards(), Sessions: opts.Sessions, RowsPerHost: map[string]int64{}}
		samples = map[int]Sample{}
	)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	perSession := (opts.Rows + opts.Sessions - 1) / opts.Sessions
	for sess := range opts.Sessions {
		g.Go(func() error {
			for done := 0; done < perSession; done += batch {
				n := min(batch, perSession-done)
				user := int64(sess + opts.Sessions*(done/batch)) // a user per batch
				shard := r.ShardForKey(user)
				var ids []idgen.ID
				var host string
				err := r.Tx(gctx, shard, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					host = s.Host
					rows, err := tx.Query(ctx, "INSERT INTO "+s.Table("likes")+" (user_id) SELECT $1 FROM generate_series(1, $2) RETURNING id", user, n)
					if err != nil {
						return err
					}
					ids, err = pgx.CollectRows(rows, pgx.RowTo[idgen.ID])
					return err
				})
				if err != nil {
					return fmt.Errorf("goroutine %d: %w", sess, err)
				}
				mu.Lock()
				for _, id := range ids {
					if _, dup := seen[id]; dup {
						rep.Duplicates++
					}
					seen[id] = shard
					if got, err := r.ShardForID(id); err != nil || got != shard {
						rep.WrongShard++
					}
				}
				rep.Rows += int64(len(ids))
				rep.RowsPerHost[host] += int64(len(ids))
				if _, ok := samples[shard]; !ok && len(ids) > 0 {
					samples[shard] = Sample{ID: ids[len(ids)-1], Host: host, Shard: shard}
				}
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	rep.IDsPerSec = float64(rep.Rows) / rep.Elapsed.Seconds()

	// A few samples, spread over the hosts.
	shards := make([]int, 0, len(samples))
	for s := range samples {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	step := max(1, len(shards)/6)
	for i := 0; i < len(shards); i += step {
		smp := samples[shards[i]]
		smp.Parts, _ = r.Layout().Decompose(smp.ID)
		rep.Samples = append(rep.Samples, smp)
	}
	return rep, nil
}

func printReport(w io.Writer, r *Report) {
	fmt.Fprintf(w, "\n%d rows in %d shards on %d hosts from %d goroutines in %.2fs: %.0f ids per second\n",
		r.Rows, r.Shards, r.Hosts, r.Sessions, r.Elapsed.Seconds(), r.IDsPerSec)
	hosts := make([]string, 0, len(r.RowsPerHost))
	for h := range r.RowsPerHost {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		fmt.Fprintf(w, "  %s: %d rows\n", h, r.RowsPerHost[h])
	}
	fmt.Fprintln(w, "sample ids, decoded (time, shard, sequence):")
	for _, s := range r.Samples {
		fmt.Fprintf(w, "  %d  time %s  shard %d  seq %d  (stored in shard_%04d on %s)\n",
			s.ID, s.Parts.Time.UTC().Format("2006-01-02T15:04:05.000Z"), s.Parts.Shard, s.Parts.Seq, s.Shard, s.Host)
	}
	fmt.Fprintf(w, "duplicates found: %d\n", r.Duplicates)
	fmt.Fprintf(w, "ids carrying another shard's id: %d\n", r.WrongShard)
	if v := r.Verify; v != nil {
		for _, p := range v.Problems {
			fmt.Fprintf(w, "verify FAIL %s\n", p)
		}
		verdict := "ok"
		if !v.OK {
			verdict = fmt.Sprintf("%d problems", len(v.Problems))
			if len(v.Problems) == 1 {
				verdict = "1 problem"
			}
		}
		fmt.Fprintf(w, "verify: %s: %d checks on %d shards and %d hosts, %d probe ids, every stored id read, %.2fs\n",
			verdict, len(v.Checks), v.Shards, v.Hosts, v.ProbeIDs, v.Elapsed.Seconds())
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
