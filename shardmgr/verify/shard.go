package verify

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	shsql "github.com/shardid/shardid/sql"
)

// shardTask is one shard checked on its host.
type shardTask struct {
	id     int
	schema string
	host   *hostScan
	params shsql.Params // what the catalog expects
	callOK bool         // a generator is there to call
	safe   bool         // the installed generator is the safe variant
}

// callable reports whether the generator may be called: present, and not
// blocked by a session holding its exclusive lock.
func (t *shardTask) callable() bool { return t.callOK && !t.host.blocked[t.id] }

// checkShards runs the per-shard checks on every shard's host, Workers at a
// time per host: generator marker and output, sequence settings, counter
// against stored ids, and the live probe.
func (v *verifier) checkShards(ctx context.Context) {
	m := v.m
	var confirm sync.WaitGroup
	for _, hs := range v.hosts {
		if hs.ok {
			confirm.Go(func() { hs.blocked = v.confirmBlocked(ctx, hs) })
		}
	}
	confirm.Wait()
	byHost := map[string][]*shardTask{}
	for _, s := range m.Shards {
		hs := v.hosts[s.Host]
		if hs == nil || !hs.ok || !hs.schemas[s.Schema] {
			continue
		}
		t := &shardTask{id: s.ID, schema: s.Schema, host: hs, params: catalog.GeneratorParams(m, s.ID)}
		v.checkGenerator(t)
		v.checkSequence(t)
		byHost[s.Host] = append(byHost[s.Host], t)
	}
	type pair struct{ a, b int }
	var (
		pmu   sync.Mutex
		drawn = map[int64]int{}    // id -> shard that returned it
		dups  = map[pair][]int64{} // shards a < b -> ids both returned
	)
	record := func(t *shardTask, ids []int64) {
		pmu.Lock()
		defer pmu.Unlock()
		for _, id := range ids {
			if other, dup := drawn[id]; dup {
				p := pair{min(t.id, other), max(t.id, other)}
				dups[p] = append(dups[p], id)
				continue
			}
			drawn[id] = t.id
		}
		v.rep.ProbeIDs += len(ids)
	}
	defer func() {
		for p, ids := range dups {
			slices.Sort(ids)
			v.problem(CheckProbe, p.a, m.Shards[p.a].Host, "%d ids drawn from shard %d were also drawn from shard %d on %s, e.g. %d",
				len(ids), p.a, p.b, m.Shards[p.b].Host, ids[0])
		}
	}()
	var wg sync.WaitGroup
	for _, tasks := range byHost {
		work := make(chan *shardTask)
		for range v.opts.Workers {
			wg.Go(func() {
				for t := range work {
					// The statements run under server-side timeouts; this
					// bound is for a server that stopped answering.
					tctx, cancel := context.WithTimeout(ctx, time.Duration(len(t.host.columns[t.schema])+6)*v.opts.StatementTimeout)
					v.checkCounter(tctx, t)
					v.checkOutput(tctx, t)
					v.probe(tctx, t, record)
					cancel()
				}
			})
		}
		wg.Go(func() {
			defer close(work)
			for _, t := range tasks {
				select {
				case work <- t:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
}

func (v *verifier) checkGenerator(t *shardTask) {
	marker, ok := t.host.generators[t.schema]
	if !ok {
		v.problem(CheckGenerator, t.id, t.host.name, "%s.next_id() is missing", t.schema)
		return
	}
	t.callOK = true
	got, version, err := shsql.ParseMarker(marker)
	if err != nil {
		v.problem(CheckGenerator, t.id, t.host.name, "%s.next_id() is not a shardid generator (comment %q)", t.schema, marker)
		return
	}
	switch {
	case version < shsql.Version:
		v.problemFix(FixGenerator, CheckGenerator, t.id, t.host.name, "%s.next_id() is generator v%d, older than the v%d this binary installs", t.schema, version, shsql.Version)
	case version > shsql.Version:
		v.problem(CheckGenerator, t.id, t.host.name, "%s.next_id() is generator v%d, installed by a newer shardid; this binary knows v%d (upgrade the binary)", t.schema, version, shsql.Version)
	}
	want := t.params
	t.safe = got.Variant == shsql.Safe
	v.countGenerator(t.id, generatorKind(got.Variant, t.host.languages[t.schema]))
	for _, a := range t.host.advancers[t.schema] {
		if a.public {
			v.problemFix(FixInitOrGenerator, CheckGenerator, t.id, t.host.name, "PUBLIC may execute %s: any role with USAGE on the schema can push the counter far ahead of the clock, or with an older generator to its maximum, stopping it for good (the install SQL again revokes it)", a.signature)
		} else if a.args == 1 {
			v.noteFix(FixInitOrGenerator, CheckGenerator, t.id, t.host.name, "%s is the form of an older install SQL, without the guard against a floor far ahead of the clock", a.signature)
		}
	}
	if got.Variant != want.Variant {
		v.problem(CheckGenerator, t.id, t.host.name, "generator variant is %s, want %s", got.Variant, want.Variant)
	}
	if got.Shard != want.Shard {
		v.problem(CheckGenerator, t.id, t.host.name, "generator is installed for shard %d", got.Shard)
	}
	if got.Epoch != want.Epoch || got.TimeBits != want.TimeBits || got.ShardBits != want.ShardBits || got.SeqBits != want.SeqBits {
		v.problem(CheckGenerator, t.id, t.host.name, "generator epoch/layout is %d %d/%d/%d, want %d %d/%d/%d",
			got.Epoch, got.TimeBits, got.ShardBits, got.SeqBits, want.Epoch, want.TimeBits, want.ShardBits, want.SeqBits)
	}
}

func (v *verifier) checkSequence(t *shardTask) {
	name := t.schema + "." + shsql.CounterName
	if !t.safe {
		if _, ok := t.host.sequences[t.schema+"."+shsql.InstagramSeqName]; ok {
			name = t.schema + "." + shsql.InstagramSeqName
		}
	}
	s, ok := t.host.sequences[name]
	if !ok {
		if t.callOK {
			v.problem(CheckSequence, t.id, t.host.name, "counter sequence %s is missing", name)
		}
		return
	}
	if s.cache > 1 {
		v.problem(CheckSequence, t.id, t.host.name, "%s has CACHE %d: sessions hand out values out of order, which the fence relies on (want CACHE 1)", name, s.cache)
	}
	if s.cycle {
		v.problem(CheckSequence, t.id, t.host.name, "%s has CYCLE: it would start over and repeat ids (want NO CYCLE)", name)
	}
	if s.increment != 1 {
		v.problem(CheckSequence, t.id, t.host.name, "%s has INCREMENT %d (want 1)", name, s.increment)
	}
}

// checkOutput calls the generator and decodes its id.
func (v *verifier) checkOutput(ctx context.Context, t *shardTask) {
	if !t.callable() {
		return
	}
	id, hostMS, err := v.drawOne(ctx, t)
	if err != nil {
		if waitedOut(err) {
			v.reportBlockedCall(ctx, t, fmt.Sprintf("calling %s.next_id()", t.schema), err)
			t.callOK = false // the probe would wait as long
			return
		}
		v.problem(CheckGeneratorID, t.id, t.host.name, "calling %s.next_id() failed: %v", t.schema, pg.OneLine(err))
		return
	}
	l := v.m.Layout
	if got := shardschema.ShardOf(l, id); got != t.id {
		v.problem(CheckGeneratorID, t.id, t.host.name, "next_id() returned %d, which carries shard %d", id, got)
	}
	tol := max(v.opts.MaxClockSkew, 2*time.Second)
	diff := time.Duration(shardschema.UnixMilli(l, id)-hostMS) * time.Millisecond
	if id >= 0 && diff.Abs() <= tol {
		return
	}
	if id >= 0 && diff > 0 && t.safe && v.waitsForClock(ctx, t, id, hostMS) {
		v.note(CheckGeneratorID, t.id, t.host.name, "counter is %s ahead of the host's clock and waits for it (advanced by next_id_advance, carried from stored ids or another host, or the clock stepped back): ids carry future times until the clock catches up",
			diff.Round(time.Millisecond))
		return
	}
	v.problem(CheckGeneratorID, t.id, t.host.name, "next_id() returned %d, whose time under the cluster's epoch is %s off the host's clock (wrong epoch or layout?)", id, diff.Round(time.Millisecond))
}

// drawOne calls the generator once, with the host's clock in ms.
func (v *verifier) drawOne(ctx context.Context, t *shardTask) (id, hostMS int64, err error) {
	q := fmt.Sprintf("SELECT %s(), pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000)::bigint",
		pgx.Identifier{t.schema, shsql.FunctionName}.Sanitize())
	err = t.host.pool.QueryRow(ctx, q).Scan(&id, &hostMS)
	return id, hostMS, err
}

// waitsForClock tells a counter that runs ahead of the clock and waits for
// it (advanced, carried over, a clock that stepped back) from a generator
// that follows a clock of its own (wrong epoch or layout): over a pause the
// latter's ids move on with the clock, the former's stand nearly still
// (only the ids drawn meanwhile move it).
func (v *verifier) waitsForClock(ctx context.Context, t *shardTask, id, hostMS int64) bool {
	select {
	case <-time.After(waitsForClockPause):
	case <-ctx.Done():
		return false
	}
	id2, hostMS2, err := v.drawOne(ctx, t)
	if err != nil {
		return false
	}
	l := v.m.Layout
	moved, elapsed := shardschema.UnixMilli(l, id2)-shardschema.UnixMilli(l, id), hostMS2-hostMS
	return id2 > id && elapsed > 0 && moved*4 < elapsed
}

// waitsForClockPause is the pause of waitsForClock.
const waitsForClockPause = 200 * time.Millisecond

// probe draws ids from the shard in two concurrent sessions.
func (v *verifier) probe(ctx context.Context, t *shardTask, record func(*shardTask, []int64)) {
	if !t.callable() {
		return
	}
	q := fmt.Sprintf("SELECT %s() FROM pg_catalog.generate_series(1, $1)", pgx.Identifier{t.schema, shsql.FunctionName}.Sanitize())
	n := (v.opts.ProbeIDs + 1) / 2
	var g errgroup.Group
	res := make([][]int64, 2)
	for i := range res {
		g.Go(func() error {
			rows, err := t.host.pool.Query(ctx, q, n)
			if err != nil {
				return err
			}
			res[i], err = pgx.CollectRows(rows, pgx.RowTo[int64])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if waitedOut(err) {
			v.reportBlockedCall(ctx, t, "drawing ids", err)
			return
		}
		v.problem(CheckProbe, t.id, t.host.name, "drawing ids failed: %v", pg.OneLine(err))
		return
	}
	// Within one shard a repeat is the shard's own; across shards the
	// cluster-wide map finds it.
	seen := map[int64]bool{}
	var ids []int64
	for _, r := range res {
		for _, id := range r {
			if seen[id] {
				v.problem(CheckProbe, t.id, t.host.name, "shard %d returned id %d twice", t.id, id)
				continue
			}
			seen[id] = true
			ids = append(ids, id)
		}
	}
	record(t, ids)
}
