package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/shardid/shardid/shardmgr/internal/base/grants"
)

// checkGrants compares the privileges of each shard's copy with those of
// its newest retired copy, when a host still keeps one: a move builds
// its target with the source's owners, privileges, default privileges and
// row-level security, so a difference is a move that lost them (or a
// change made since on one copy).
func (v *verifier) checkGrants(ctx context.Context) {
	type retired struct {
		host, schema string
		gen          int64
	}
	newest := map[int]retired{}
	for _, h := range v.cfg.Hosts {
		hs := v.hosts[h.Name]
		if !hs.ok {
			continue
		}
		for schema, rc := range hs.retired {
			var gen int64
			if i := strings.LastIndex(schema, "_moved_g"); i >= 0 {
				fmt.Sscanf(schema[i+len("_moved_g"):], "%d", &gen)
			}
			if cur, ok := newest[rc.Shard]; !ok || gen > cur.gen {
				newest[rc.Shard] = retired{h.Name, schema, gen}
			}
		}
	}
	tk := grants.ShardToolkit()
	for id, old := range newest {
		if id < 0 || id >= len(v.m.Shards) {
			continue
		}
		s := v.m.Shards[id]
		hs, ok := v.hosts[s.Host]
		if !ok || !hs.ok || !hs.schemas[s.Schema] {
			continue // placement reports it
		}
		cur, err := grants.ReadDB(ctx, hs.pool, s.Schema, tk)
		if err != nil {
			v.problem(CheckGrants, id, s.Host, "%v", err)
			continue
		}
		was, err := grants.ReadDB(ctx, v.hosts[old.host].pool, old.schema, tk)
		if err != nil {
			v.problem(CheckGrants, id, old.host, "%v", err)
			continue
		}
		if d := grants.Compare(was, cur); len(d) > 0 {
			v.problemFix(FixCleanupRetired, CheckGrants, id, s.Host, "the shard's privileges differ from its retired copy %s on %s: %s (grant what the move lost; a change made on purpose since the move: drop the retired copy)",
				old.schema, old.host, strings.Join(d, "; "))
		}
	}
}
