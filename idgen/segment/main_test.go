package segment_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a set of source databases for one test.
type fixture struct {
	dsns  []string
	pools []*pgxpool.Pool
}

// newFixture creates n source databases on the package's shared server.
func newFixture(t testing.TB, n int) *fixture {
	t.Helper()
	srv := pgtest.Servers(t, 1)[0]
	servers := make([]*localpg.Server, n)
	for i := range servers {
		servers[i] = srv
	}
	return fixtureOn(t, servers...)
}

// fixtureOn creates one source database on each server.
func fixtureOn(t testing.TB, servers ...*localpg.Server) *fixture {
	t.Helper()
	f := &fixture{}
	for _, s := range servers {
		dsn := pgtest.NewDB(t, s)
		f.dsns = append(f.dsns, dsn)
		f.pools = append(f.pools, pgtest.Pool(t, dsn))
	}
	return f
}

// prepare applies the segment migrations to a source, as shardid serve does.
func (f *fixture) prepare(ctx context.Context, i int) error {
	return migrations.Up(ctx, f.dsns[i], migrations.Segment)
}

func (f *fixture) open(t testing.TB, tags map[string]segment.TagConfig, opts ...segment.Option) *segment.Allocator {
	t.Helper()
	opts = append([]segment.Option{segment.WithPrepare(f.prepare), segment.WithLogger(quietLogger())}, opts...)
	a, err := segment.New(f.pools, tags, opts...)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// maxID reads the tag's row on source i.
func (f *fixture) maxID(t testing.TB, i int, tag string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, f.pools[i].QueryRow(context.Background(), "SELECT max_id FROM shardid.segments WHERE tag = $1", tag).Scan(&v))
	return v
}

func requireUnique(t testing.TB, ids []int64) {
	t.Helper()
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			t.Fatalf("id %d handed out twice", sorted[i])
		}
	}
}

// fakeClock is a clock moved by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// localSources starts a throwaway PostgreSQL server with n databases for
// the example, which has no *testing.T; cleanup stops it.
func localSources(n int) (dsns []string, cleanup func()) {
	ctx := context.Background()
	srv, err := localpg.Start(ctx, localpg.Options{})
	if err != nil {
		panic(err)
	}
	for i := range n {
		dsn, err := srv.CreateDatabase(ctx, fmt.Sprintf("example_seg%d", i))
		if err != nil {
			srv.Stop()
			panic(err)
		}
		dsns = append(dsns, dsn)
	}
	return dsns, func() { srv.Stop() }
}
