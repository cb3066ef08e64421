package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	shsql "github.com/shardid/shardid/sql"
)

// Generator kinds a report counts (Report.Generators): the safe variant's
// two forms, by the language of next_id(), and Instagram's function.
const (
	GeneratorPLpgSQL   = shsql.GeneratorPLpgSQL // the safe generator's inlined SQL form
	GeneratorC         = shsql.GeneratorC       // the safe generator's C form (ext/shardid)
	GeneratorInstagram = shsql.Instagram        // Instagram's published function
)

// GeneratorCount is how many of the verified shards run one kind of
// generator, and which. JSON: {"kind":"c","count":2,"shards":"4-5"}.
type GeneratorCount struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count"`
	Shards string `json:"shards"` // as shardmgr.FormatShardList writes them
	ids    []int  // while counting
}

// readGeneratorLanguages maps each schema holding a next_id() to the
// language it is written in ("sql", "c", "plpgsql").
func readGeneratorLanguages(ctx context.Context, q pg.Querier) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT n.nspname, l.lanname
		FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
		JOIN pg_catalog.pg_language l ON l.oid = p.prolang
		WHERE p.proname = 'next_id' AND p.pronargs = 0`)
	if err != nil {
		return nil, fmt.Errorf("read generators' languages: %w", err)
	}
	out := map[string]string{}
	var schema, lang string
	_, err = pgx.ForEachRow(rows, []any{&schema, &lang}, func() error {
		out[schema] = lang
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read generators' languages: %w", err)
	}
	return out, nil
}

// generatorKind names what a shard runs, from its marker's variant and
// the language of its next_id().
func generatorKind(variant, lang string) string {
	switch {
	case variant == shsql.Instagram:
		return GeneratorInstagram
	case lang == "c":
		return GeneratorC
	default:
		return GeneratorPLpgSQL
	}
}

// countGenerator records that shard runs kind.
func (v *verifier) countGenerator(shard int, kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	i := slices.IndexFunc(v.rep.Generators, func(g GeneratorCount) bool { return g.Kind == kind })
	if i < 0 {
		v.rep.Generators = append(v.rep.Generators, GeneratorCount{Kind: kind})
		i = len(v.rep.Generators) - 1
	}
	v.rep.Generators[i].ids = append(v.rep.Generators[i].ids, shard)
}

// finishGenerators sorts the counts by kind and writes their shard lists.
func (r *Report) finishGenerators() {
	slices.SortFunc(r.Generators, func(a, b GeneratorCount) int { return strings.Compare(a.Kind, b.Kind) })
	for i := range r.Generators {
		g := &r.Generators[i]
		slices.Sort(g.ids)
		g.ids = slices.Compact(g.ids)
		g.Count = len(g.ids)
		g.Shards = shardmgr.FormatShardList(g.ids)
		g.ids = nil
	}
}

// runsC reports whether shard's generator on hs is the C one, which takes
// no advisory lock: a session holding the shard's exclusive lock does not
// block its next_id(), only next_id_advance and a move's clamp.
func (v *verifier) runsC(hs *hostScan, shard int) bool {
	if v.m == nil || shard < 0 || shard >= len(v.m.Shards) {
		return false
	}
	return hs.languages[v.m.Shards[shard].Schema] == "c"
}
