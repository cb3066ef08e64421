package rebalance

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/grants"
)

// shardToolkit is what the toolkit makes in a shard schema (package
// grants) and the triggers a move adds.
var shardToolkit = grants.ShardToolkit(deltaTrigger, deltaTruncate)

// carryGrants makes the target's copy carry what the source's schema
// carries that users rely on (owners, privileges, default privileges,
// row-level security and policies, user triggers, comments; package
// grants), after the migrations built it: an application keeps its
// rights on the shard across the flip. The roles the grants name must
// exist on the target. A table with row-level security needs a mover
// that bypasses it, or the copy and its checks would see only the rows
// the policies show the mover.
func (mo *mover) carryGrants(ctx context.Context, mv *move) error {
	src, err := grants.ReadDB(ctx, mv.src, mv.Schema, shardToolkit)
	if err != nil {
		return fmt.Errorf("source %s: %w", mv.From, err)
	}
	var rls []string
	for t, mode := range src.RLS {
		if mode != "" {
			rls = append(rls, t)
		}
	}
	if len(rls) > 0 {
		var bypass bool
		if err := mv.src.QueryRow(ctx, `SELECT rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER`).Scan(&bypass); err != nil {
			return fmt.Errorf("source %s: %w", mv.From, err)
		}
		if !bypass {
			return fmt.Errorf("%w: tables %s of %s have row-level security, and the role running the move neither is a superuser nor has BYPASSRLS: the copy would see only the rows its policies show",
				ErrMoveCheck, strings.Join(rls, ", "), mv.Schema)
		}
	}
	err = pgx.BeginFunc(ctx, mv.dst, func(tx pgx.Tx) error { return grants.Carry(ctx, tx, src, shardToolkit) })
	if err != nil {
		return fmt.Errorf("target %s: carry the shard's grants: %w", mv.To, err)
	}
	return nil
}
