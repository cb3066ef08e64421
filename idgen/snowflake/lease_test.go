package snowflake_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// leaseDB creates a lease database for one test and returns its DSN.
func leaseDB(t *testing.T) string {
	t.Helper()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	require.NoError(t, migrations.Up(context.Background(), dsn, migrations.Snowflake))
	return dsn
}

func start(t *testing.T, db snowflake.DB, s snowflake.Settings, opts ...snowflake.LeaseOption) *snowflake.Generator {
	t.Helper()
	g, err := snowflake.Start(context.Background(), db, s, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close(context.Background()) })
	return g
}

func lease(t *testing.T, g *snowflake.Generator) snowflake.Lease {
	t.Helper()
	l, ok := g.Lease()
	require.True(t, ok)
	return l
}

func timeOf(t *testing.T, g *snowflake.Generator, id int64) time.Time {
	t.Helper()
	p, err := g.Layout().Decompose(id)
	require.NoError(t, err)
	return p.Time
}

func TestLeaseTwoHoldersGetDifferentWorkers(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	a := start(t, pool, snowflake.Settings{Datacenter: 2}, snowflake.WithHolder("a"))
	b := start(t, pool, snowflake.Settings{Datacenter: 2}, snowflake.WithHolder("b"))
	other := start(t, pool, snowflake.Settings{Datacenter: 3})
	la, lb := lease(t, a), lease(t, b)
	require.NotEqual(t, la.Worker, lb.Worker)
	require.Greater(t, lb.Token, la.Token, "fencing tokens grow with every acquisition")
	require.Equal(t, int64(0), lease(t, other).Worker, "datacenters lease apart")
	seen := map[int64]bool{}
	for range 20000 {
		for _, g := range []*snowflake.Generator{a, b, other} {
			id := next(t, g)
			require.False(t, seen[id])
			seen[id] = true
		}
	}
	p, _ := a.Layout().Decompose(next(t, b))
	require.Equal(t, int64(2), p.Datacenter)
	require.Equal(t, lb.Worker, p.Worker)
}

func TestLeaseNoFreeWorker(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	two := snowflake.Settings{Layout: snowflake.Layout{TimeBits: 41, WorkerBits: 1, SeqBits: 21}}
	start(t, pool, two)
	start(t, pool, two)
	_, err := snowflake.Start(context.Background(), pool, two)
	require.ErrorIs(t, err, snowflake.ErrNoFreeWorker)
}

// A holder that dies keeps its worker until the TTL has passed; the next
// holder of that worker starts strictly after the last time the dead one
// could have used, even though the dead one's clock ran ahead.
func TestLeaseTakeoverStartsAfterPreviousHolder(t *testing.T) {
	dsn := leaseDB(t)
	pool := pgtest.Pool(t, dsn)
	const ttl = time.Second
	opts := []snowflake.LeaseOption{snowflake.WithTTL(ttl), snowflake.WithHeartbeat(200 * time.Millisecond)}

	// a's clock runs 150 ms ahead; its pool goes away as if it crashed.
	aPool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	ahead := func() time.Time { return time.Now().Add(150 * time.Millisecond) }
	a, err := snowflake.Start(context.Background(), aPool, snowflake.Settings{Now: ahead}, opts...)
	require.NoError(t, err)
	require.Equal(t, int64(0), lease(t, a).Worker)
	var aLast int64
	for range 1000 {
		aLast = next(t, a)
	}
	time.Sleep(300 * time.Millisecond) // a renews once at least
	aLast = next(t, a)
	aPool.Close()

	// While a's lease lives, worker 0 is not handed out.
	b := start(t, pool, snowflake.Settings{}, opts...)
	require.Equal(t, int64(1), lease(t, b).Worker)

	// a stops issuing on its own before its lease can expire.
	require.Eventually(t, func() bool {
		id, err := a.NextID()
		if err == nil {
			aLast = id
		}
		return err != nil
	}, 2*ttl, time.Millisecond)
	_, err = a.NextID()
	require.ErrorIs(t, err, snowflake.ErrLeaseExpired)
	aLastTime := timeOf(t, a, aLast)

	// After the TTL, c gets worker 0 and starts after a's last id, and
	// after the last time a could have used.
	var c *snowflake.Generator
	require.Eventually(t, func() bool {
		g, err := snowflake.Start(context.Background(), pool, snowflake.Settings{}, opts...)
		require.NoError(t, err)
		if lease(t, g).Worker == 0 {
			c = g
			return true
		}
		require.NoError(t, g.Close(context.Background()))
		return false
	}, 3*ttl, 50*time.Millisecond)
	t.Cleanup(func() { c.Close(context.Background()) })
	lc := lease(t, c)
	require.Greater(t, lc.Token, lease(t, a).Token)
	require.GreaterOrEqual(t, lc.PreviousUntil, aLastTime.UnixMilli(), "the row kept a's last possible time")
	var first int64
	require.Eventually(t, func() bool {
		id, err := c.NextID() // may refuse while c's clock is behind a's last time
		if err != nil {
			require.ErrorIs(t, err, snowflake.ErrClockMovedBackwards)
			return false
		}
		first = id
		return true
	}, 2*ttl, time.Millisecond)
	require.True(t, timeOf(t, c, first).After(aLastTime), "c starts at %s, a's last id is at %s", timeOf(t, c, first), aLastTime)
	require.Greater(t, timeOf(t, c, first).UnixMilli(), lc.PreviousUntil)
	require.Error(t, a.Close(context.Background()), "a's pool is gone: nothing to release with, and nothing needed")
}

// A holder whose renewals cannot get through stops issuing while its lease
// is still valid in the database, and resumes once a renewal succeeds.
func TestLeaseHolderThatCannotRenewStopsIssuing(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	ctx := context.Background()
	g := start(t, pool, snowflake.Settings{}, snowflake.WithTTL(time.Second), snowflake.WithHeartbeat(200*time.Millisecond))
	l := lease(t, g)
	last := next(t, g)

	// Hold the lease row: renewals wait, then time out.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback(context.Background()) }) // before g's Close, which releases the row
	_, err = tx.Exec(ctx, "SELECT 1 FROM shardid.snowflake_leases WHERE datacenter = $1 AND worker = $2 FOR UPDATE", l.Datacenter, l.Worker)
	require.NoError(t, err)
	var stoppedAt time.Time
	require.Eventually(t, func() bool {
		id, err := g.NextID()
		if err != nil {
			require.ErrorIs(t, err, snowflake.ErrLeaseExpired)
			stoppedAt = time.Now()
			return true
		}
		require.Greater(t, id, last)
		last = id
		return false
	}, 3*time.Second, time.Millisecond)
	// Every id it issued lies before the lease's expiry as the database
	// records it (what the next holder goes by), however slow the machine
	// was to notice.
	var expires time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT expires_at FROM shardid.snowflake_leases WHERE datacenter = $1 AND worker = $2`,
		l.Datacenter, l.Worker).Scan(&expires))
	require.True(t, timeOf(t, g, last).Before(expires), "last id at %s, the lease expires at %s", timeOf(t, g, last), expires)
	_, err = g.NextID()
	require.ErrorIs(t, err, snowflake.ErrLeaseExpired)
	t.Logf("stopped at %s, last id %s before expiry in the database", stoppedAt.Format(time.StampMilli), expires.Sub(timeOf(t, g, last)))

	// The database answers again: the lease is renewed and ids go on.
	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool {
		id, err := g.NextID()
		if err != nil {
			return false
		}
		require.Greater(t, id, last)
		return true
	}, 3*time.Second, 10*time.Millisecond)
}

// Close releases the worker at once, recording the last time it used, so
// the next holder takes it without waiting for the TTL and still starts
// after it.
func TestLeaseCloseReleases(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	ctx := context.Background()
	a := start(t, pool, snowflake.Settings{}, snowflake.WithTTL(time.Minute))
	var last int64
	for range 5000 {
		last = next(t, a)
	}
	require.NoError(t, a.Close(ctx))
	_, err := a.NextID()
	require.ErrorIs(t, err, snowflake.ErrClosed)
	require.NoError(t, a.Close(ctx), "Close is idempotent")

	b := start(t, pool, snowflake.Settings{}, snowflake.WithTTL(time.Minute))
	lb := lease(t, b)
	require.Equal(t, lease(t, a).Worker, lb.Worker)
	require.GreaterOrEqual(t, lb.PreviousUntil, timeOf(t, a, last).UnixMilli())
	require.Less(t, lb.PreviousUntil, time.Now().Add(time.Second).UnixMilli(), "the promise of a minute was given back")
	first := next(t, b)
	require.Greater(t, first, last)
	require.True(t, timeOf(t, b, first).After(timeOf(t, a, last)))
}

// Close does not wait longer than the lease's TTL for a release someone's
// lock holds up: by then the lease has expired by itself.
func TestLeaseCloseWaitsAtMostTheTTL(t *testing.T) {
	pool := pgtest.Pool(t, leaseDB(t))
	ctx := context.Background()
	ttl := 2 * time.Second
	g := start(t, pool, snowflake.Settings{}, snowflake.WithTTL(ttl))
	l := lease(t, g)
	next(t, g)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, "SELECT 1 FROM shardid.snowflake_leases WHERE datacenter = $1 AND worker = $2 FOR UPDATE", l.Datacenter, l.Worker)
	require.NoError(t, err)

	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- g.Close(ctx) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // the bound is the TTL; a minute is a hang on any machine
		t.Fatal("Close still waiting a minute after the row was locked")
	}
	require.ErrorContains(t, err, "not done within the lease's TTL")
	require.GreaterOrEqual(t, time.Since(began), ttl-100*time.Millisecond)
	_, err = g.NextID()
	require.ErrorIs(t, err, snowflake.ErrClosed)
}

func TestLeaseBadOptions(t *testing.T) {
	_, err := snowflake.Start(context.Background(), nil, snowflake.Settings{}, snowflake.WithTTL(time.Second), snowflake.WithHeartbeat(time.Second))
	require.ErrorIs(t, err, snowflake.ErrInvalidSettings)
}

// A value an option cannot use fails Start, before it reads the table,
// naming the option; WithLogger(nil) is one, as in every package
// (shardmgr's doc.go). Failed before: WithLogger(nil) meant "nowhere" and
// the errors named no option.
func TestLeaseOptionsAreCheckedAndNamed(t *testing.T) {
	for name, opt := range map[string]snowflake.LeaseOption{
		"WithLogger(nil)":   snowflake.WithLogger(nil),
		"WithTTL(1ms)":      snowflake.WithTTL(time.Millisecond),
		"WithHeartbeat(0s)": snowflake.WithHeartbeat(0),
		"WithMaxWait(-1s)":  snowflake.WithMaxWait(-time.Second),
		`WithHolder("")`:    snowflake.WithHolder(""),
	} {
		_, err := snowflake.Start(context.Background(), nil, snowflake.Settings{}, opt)
		require.ErrorIs(t, err, snowflake.ErrInvalidSettings, name)
		require.ErrorContains(t, err, name+": want ")
	}
}
