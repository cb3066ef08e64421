package verify

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
)

// deepLimit bounds how many misplaced ids one column reports and carries
// into the duplicate search.
const deepLimit = 10000

// storedAt is where a stored id was found.
type storedAt struct {
	host   string
	shard  int
	column shardschema.IDColumn
}

func (s storedAt) String() string {
	return fmt.Sprintf("%s on %s (shard %d)", s.column, s.host, s.shard)
}

// checkStored reads every id stored in a column whose DEFAULT is a shard
// generator, on every host. An id that appears twice across shards has at
// least one copy that does not decode to the shard it is stored in, so
// finding the misplaced ids, then looking each one up in the shard it
// decodes to and among the other misplaced ids, finds every cross-shard
// duplicate without holding all ids in memory. Repeats within one shard are
// found by the database.
func (v *verifier) checkStored(ctx context.Context) {
	l := v.m.Layout
	mask := int64(1)<<l.ShardBits - 1
	var (
		mu        sync.Mutex
		misplaced = map[int64][]storedAt{}
		wg        sync.WaitGroup
	)
	for _, h := range v.cfg.Hosts {
		hs := v.hosts[h.Name]
		if !hs.ok {
			continue
		}
		wg.Go(func() {
			for _, schema := range slices.Sorted(maps.Keys(hs.columns)) {
				if _, ok := hs.retired[schema]; ok {
					continue // a moved shard's old copy: its ids live on in the new one
				}
				shard, ok := shardOfSchema(schema, hs.generators[schema])
				if !ok {
					continue
				}
				cols := hs.columns[schema]
				for _, c := range cols {
					q := fmt.Sprintf(`SELECT %[1]s::bigint FROM %[2]s
						WHERE %[1]s IS NOT NULL AND ((%[1]s::bigint >> %[3]d) & %[4]d) <> $1 ORDER BY 1 LIMIT %[5]d`,
						c.Column, c.From(), l.SeqBits, mask, deepLimit+1)
					rows, err := hs.deep.Query(ctx, q, shard)
					var ids []int64
					if err == nil {
						ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
					}
					if err != nil {
						v.problem(CheckStoredShard, shard, hs.name, "read %s: %v", c, pg.OneLine(err))
						continue
					}
					if len(ids) == 0 {
						continue
					}
					count := fmt.Sprint(len(ids))
					if len(ids) > deepLimit {
						ids, count = ids[:deepLimit], fmt.Sprintf("more than %d", deepLimit)
					}
					v.problem(CheckStoredShard, shard, hs.name, "%s ids in %s do not decode to shard %d, e.g. %d (shard %d)",
						count, c, shard, ids[0], shardschema.ShardOf(l, ids[0]))
					mu.Lock()
					for _, id := range ids {
						misplaced[id] = append(misplaced[id], storedAt{hs.name, shard, c})
					}
					mu.Unlock()
				}
				v.duplicatesWithin(ctx, hs, shard, cols)
			}
		})
	}
	wg.Wait()

	// Misplaced ids against each other and against the shard they decode to.
	home := map[int][]int64{}
	for id, locs := range misplaced {
		if len(locs) > 1 {
			v.problem(CheckDuplicateID, locs[0].shard, locs[0].host, "id %d is stored %d times: %s", id, len(locs), joinLocs(locs))
		}
		home[shardschema.ShardOf(l, id)] = append(home[shardschema.ShardOf(l, id)], id)
	}
	for shard, ids := range home {
		if shard >= len(v.m.Shards) {
			continue
		}
		s := v.m.Shards[shard]
		hs := v.hosts[s.Host]
		if hs == nil || !hs.ok {
			continue
		}
		for _, c := range hs.columns[s.Schema] {
			rows, err := hs.deep.Query(ctx, fmt.Sprintf("SELECT %[1]s::bigint FROM %[2]s WHERE %[1]s = ANY($1)", c.Column, c.From()), ids)
			var found []int64
			if err == nil {
				found, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			}
			if err != nil {
				v.problem(CheckDuplicateID, shard, hs.name, "read %s: %v", c, pg.OneLine(err))
				continue
			}
			for _, id := range found {
				v.problem(CheckDuplicateID, shard, hs.name, "id %d is stored in %s and also in %s", id, storedAt{hs.name, shard, c}, joinLocs(misplaced[id]))
			}
		}
	}
}

// duplicatesWithin finds ids stored twice among one shard's columns on one
// host.
func (v *verifier) duplicatesWithin(ctx context.Context, hs *hostScan, shard int, cols []shardschema.IDColumn) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf("SELECT %s::bigint AS id FROM %s", c.Column, c.From())
	}
	q := "SELECT id, count(*) FROM (" + strings.Join(parts, " UNION ALL ") + ") s WHERE id IS NOT NULL GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 10"
	rows, err := hs.deep.Query(ctx, q)
	if err != nil {
		v.problem(CheckDuplicateID, shard, hs.name, "search duplicates: %v", pg.OneLine(err))
		return
	}
	var id, n int64
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		v.problem(CheckDuplicateID, shard, hs.name, "id %d is stored %d times in shard %d's tables (%s)", id, n, shard, joinCols(cols))
		return nil
	})
	if err != nil {
		v.problem(CheckDuplicateID, shard, hs.name, "search duplicates: %v", pg.OneLine(err))
	}
}

func joinLocs(locs []storedAt) string {
	s := make([]string, len(locs))
	for i, l := range locs {
		s[i] = l.String()
	}
	return strings.Join(s, ", ")
}

func joinCols(cols []shardschema.IDColumn) string {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}
