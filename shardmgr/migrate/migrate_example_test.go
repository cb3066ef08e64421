package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// Apply a directory of tern migrations to every shard of the cluster and
// list the shards that stopped.
func ExampleMigrate() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	set, err := migrate.LoadMigrationDir("migrations")
	if err != nil {
		log.Fatal(err) // nothing ran: the files do not render
	}
	res, err := migrate.Migrate(ctx, cfg, set, migrate.MigrateOptions{Workers: 4})
	var perr *shardmgr.ShardErrors
	switch {
	case errors.As(err, &perr):
		for _, err := range perr.Errs {
			var f *migrate.MigrationError
			if !errors.As(err, &f) {
				continue
			}
			fmt.Printf("shard %d on %s stays at version %d: %s: %s (SQLSTATE %s)\n",
				f.Shard, f.Host, f.Version, f.Migration, f.Message, f.SQLState)
		}
	case err != nil:
		log.Fatal(err)
	}
	changed, unchanged, failed, _ := res.Counts()
	fmt.Printf("migrated %d, already there %d, failed %d\n", changed, unchanged, failed)
}
