package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/shardmgr"
	shsql "github.com/shardid/shardid/sql"
)

// CreateCluster records cfg's cluster, its hosts hosts (of cfg) and its
// shards (shards[id] is shard id's place: host, schema and state) at
// generation gen, with the change what, inside the transaction that
// creates the cluster (the caller holds shardid.cluster's table lock and
// found no cluster). Init creates a new cluster with it (identity "": the
// catalog makes one); the catalog repair rebuilds an emptied catalog
// from its hosts' records (the identity they record, above every
// generation they recorded).
func CreateCluster(ctx context.Context, tx pgx.Tx, cfg *shardmgr.Config, identity string, gen int64, hosts []shardmgr.Host, shards []shardmgr.Shard, what string) error {
	if len(shards) != cfg.Shards {
		return fmt.Errorf("%d shards placed, the cluster has %d", len(shards), cfg.Shards)
	}
	l := idgen.DefaultLayout().Resolved()
	if cfg.EpochMS != 0 {
		l.Epoch = cfg.EpochMS
	}
	var id *string
	if identity != "" {
		id = &identity
	}
	if _, err := tx.Exec(ctx, `INSERT INTO shardid.cluster (name, shards, epoch_ms, time_bits, shard_bits, seq_bits, variant, generation, identity)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9::uuid, pg_catalog.gen_random_uuid()))`,
		cfg.Cluster, cfg.Shards, l.Epoch, l.TimeBits, l.ShardBits, l.SeqBits, shsql.Safe, gen, id); err != nil {
		return err
	}
	for _, h := range hosts {
		if err := InsertHost(ctx, tx, h, gen); err != nil {
			return err
		}
	}
	rows := make([][]any, len(shards))
	for id, s := range shards {
		if s.ID != id {
			return fmt.Errorf("shard %d placed as shard %d", s.ID, id)
		}
		rows[id] = []any{id, s.Schema, s.Host, string(s.State), gen}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"shardid", "shards"},
		[]string{"id", "schema_name", "host", "state", "changed_generation"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO shardid.changes (generation, what) VALUES ($1, $2)`, gen, what)
	return err
}
