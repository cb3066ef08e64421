package segment

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/internal/pgtrust"
)

// RelayoutResult tells what Relayout did for one tag.
type RelayoutResult struct {
	Tag string
	// Highest is the greatest id any source had reserved for the tag
	// under the old layout; every id of the new layout is above it.
	Highest int64
	// Base is where the new layout starts: source i hands out
	// Base+i+N, Base+i+2N, ... with N = len(pools).
	Base int64
}

// Relayout moves tags (nil: every tag found on any source) to the layout
// of pools, typically the old sources in their old order with new
// databases appended. Every source must answer and hold the segment
// migrations. For each tag it first fences the tag's row on every source,
// so that no allocator can take a segment any more, reads the highest id
// reserved, then gives source i the residue i modulo len(pools) starting
// above that id. Ids never repeat: every new id is above every old one.
//
// Running allocators with the old source list keep serving the ids in
// their memory, then refuse the new rows (LayoutError): restart them with
// the new list. If Relayout stops half way, the fenced rows hand out
// nothing; run it again to finish.
func Relayout(ctx context.Context, pools []*pgxpool.Pool, tags []string) ([]RelayoutResult, error) {
	if len(pools) == 0 {
		return nil, fmt.Errorf("%w: no source databases", ErrConfig)
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = sourceName(p, i)
	}
	// Every source first, before reading or writing any.
	for i, p := range pools {
		if err := pgtrust.Check(ctx, p, schema); err != nil {
			return nil, fmt.Errorf("relayout: %s: %w", names[i], err)
		}
	}
	if tags == nil {
		seen := map[string]bool{}
		for i, p := range pools {
			rows, _ := p.Query(ctx, `SELECT tag FROM shardid.segments`)
			found, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return nil, fmt.Errorf("relayout: %s: %w", names[i], err)
			}
			for _, t := range found {
				seen[t] = true
			}
		}
		for t := range seen {
			tags = append(tags, t)
		}
		sort.Strings(tags)
	}
	n := int64(len(pools))
	var out []RelayoutResult
	for _, tag := range tags {
		var highest int64
		for i, p := range pools {
			var v int64
			err := p.QueryRow(ctx, `UPDATE shardid.segments SET fenced = true, updated_at = now() WHERE tag = $1 RETURNING max_id`, tag).Scan(&v)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return out, fmt.Errorf("relayout tag %s: fence on %s: %w", tag, names[i], err)
			}
			highest = max(highest, v)
		}
		base := alignUp(highest, n, 0)
		for i, p := range pools {
			_, err := p.Exec(ctx, `INSERT INTO shardid.segments (tag, max_id, step, stride, residue)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (tag) DO UPDATE SET max_id = EXCLUDED.max_id, stride = EXCLUDED.stride,
    residue = EXCLUDED.residue, fenced = false, updated_at = now()`,
				tag, base+int64(i), int64(DefaultMinStep), n, i)
			if err != nil {
				return out, fmt.Errorf("relayout tag %s: %s: %w", tag, names[i], err)
			}
		}
		out = append(out, RelayoutResult{Tag: tag, Highest: highest, Base: base})
	}
	return out, nil
}
