package install

import (
	"context"
	"errors"
	"log/slog"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// upgradeGenerators brings the generators Init found on the shards in
// present to this release's (migrate.UpgradeGenerators): an older version
// is upgraded, the counter carried past the ids stored, and a current one
// gets the install SQL again, which re-applies its privileges (an
// installation of an older release, or a grant made by hand, may let
// PUBLIC execute next_id_advance). A generator whose privileges changed is
// a new version (sql.Version), so after Init every shard has this
// release's objects and privileges. Upgraded shards count as installed;
// the shards that failed are returned.
func upgradeGenerators(ctx context.Context, c *cluster.Cluster, present []int, opts InitOptions, log *slog.Logger, res *InitResult) ([]error, error) {
	r, err := migrate.UpgradeGenerators(ctx, c, migrate.GeneratorOptions{
		Shards: present, Workers: opts.Workers, Logger: log,
		Waiting: func(w migrate.LockWait) {
			log.Info("generator upgrade waits for the shard's migration lock", "shard", w.Shard, "host", w.Host, "holder_pid", w.HolderPID)
		},
	})
	if r == nil {
		return nil, err
	}
	upgraded, _, _ := r.Counts()
	res.Installed += upgraded
	res.Unchanged -= upgraded
	var se *shardmgr.ShardErrors
	if errors.As(err, &se) {
		return se.Errs, nil
	}
	return nil, err
}
