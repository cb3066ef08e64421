package rebalance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/grants"
)

// Sentinel errors about roles; test with errors.Is.
var (
	// ErrMissingRole: the target's server lacks a role that the shard's
	// grants name (roles belong to a server); the move built nothing.
	ErrMissingRole = grants.ErrMissingRole
	// ErrForeignOwner: a function the toolkit relies on in the shard's
	// schema (the fence's, the change log's) exists and another role owns
	// it, which could make it let every write through.
	ErrForeignOwner = fence.ErrForeignOwner
)

// shardToolkit is what the toolkit makes in a shard schema (package
// grants) and the triggers a move adds.
var shardToolkit = grants.ShardToolkit(deltaTrigger, deltaTruncate)

// sourceGrants reads what the source's schema carries that users rely on
// (owners, privileges, default privileges, row-level security and
// policies, user triggers, comments; package grants), which the target
// is given once the migrations built it, and refuses a move that could not
// carry it: a target that lacks a role it names, or a table with
// row-level security and a mover that does not bypass it (the copy and
// its checks would see only the rows the policies show the mover).
func (mo *mover) sourceGrants(ctx context.Context, mv *move) (*grants.Schema, error) {
	src, err := grants.ReadDB(ctx, mv.src, mv.Schema, shardToolkit)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", mv.From, err)
	}
	if err := grants.CheckRoles(ctx, mv.dst, src); err != nil {
		return nil, fmt.Errorf("target %s: %w", mv.To, err)
	}
	var rls []string
	for t, mode := range src.RLS {
		if mode != "" {
			rls = append(rls, t)
		}
	}
	if len(rls) > 0 {
		slices.Sort(rls)
		var bypass bool
		if err := mv.src.QueryRow(ctx, `SELECT rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER`).Scan(&bypass); err != nil {
			return nil, fmt.Errorf("source %s: %w", mv.From, err)
		}
		if !bypass {
			return nil, fmt.Errorf("%w: tables %s of %s have row-level security, and the role running the move neither is a superuser nor has BYPASSRLS: the copy would see only the rows its policies show",
				ErrMoveCheck, strings.Join(rls, ", "), mv.Schema)
		}
	}
	return src, nil
}

// carryGrants gives the target's copy what src, the source's, carries:
// an application keeps its rights on the shard across the flip. The user
// triggers are the copy's to make, after the rows are in
// (copy_deferred.go): here the target is left with none.
func (mo *mover) carryGrants(ctx context.Context, mv *move, src *grants.Schema) error {
	carried := *src
	carried.Triggers = nil
	err := pgx.BeginFunc(ctx, mv.dst, func(tx pgx.Tx) error { return grants.Carry(ctx, tx, &carried, shardToolkit) })
	if err != nil {
		return fmt.Errorf("target %s: carry the shard's grants: %w", mv.To, err)
	}
	return nil
}
