package migrate_test

import (
	"github.com/shardid/shardid/shardmgr/cluster"

	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

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
	c, err := cluster.Open(ctx, cfg) // validates the file; pools open on first use
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := migrate.Migrate(ctx, c, set, migrate.Options{Workers: 4})
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

// The whole library as docs/migrations.md shows it: every option of a run,
// the failures one by one, the status, rendering for other tools, and the
// generator upgrade.
func Example_library() {
	ctx := context.Background()
	cfg, err := shardmgr.LoadConfig("shardid.yaml")
	if err != nil {
		log.Fatal(err)
	}
	dir := os.TempDir()
	c, err := cluster.Open(ctx, cfg) // one handle for every call below
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	set, err := migrate.LoadMigrationDir("migrations") // or LoadMigrationSet(embedFS)
	if err != nil {
		log.Fatal(err) // nothing ran: the files do not render
	}
	res, err := migrate.Migrate(ctx, c, set, migrate.Options{
		Direction: migrate.Up, To: 0 /* latest */, Workers: 4, FailFast: false,
		Progress: func(p migrate.HostProgress) { log.Printf("%s: %d of %d, %d failed", p.Host, p.Done, p.Total, p.Failed) },
		Waiting:  func(w migrate.LockWait) { log.Printf("shard %d on %s waits for pid %d", w.Shard, w.Host, w.HolderPID) },
		Logger:   slog.Default(),
	})
	var serr *shardmgr.ShardErrors // some shards failed; res has all of them
	if errors.As(err, &serr) {
		for _, e := range serr.Errs {
			var f *migrate.MigrationError // Shard, Host, Version, Migration, SQLState, Message
			if errors.As(e, &f) {
				log.Printf("shard %d: %s: %s", f.Shard, f.Migration, f.Message)
			}
		}
	} else if err != nil {
		log.Fatal(err)
	}
	changed, unchanged, failed, _ := res.Counts()
	log.Printf("migrated %d, already there %d, failed %d", changed, unchanged, failed)

	st, err := migrate.ReadMigrationStatus(ctx, c, set) // st.Summary(): AtVersion, Behind, Failed, ...
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("behind: %v", st.Summary().Behind)
	migs, err := set.Render(5, "shard_0005") // []RenderedMigration
	if err != nil {
		log.Fatal(err)
	}
	paths, err := migrate.WriteRendered(dir, migrate.FormatGolangMigrate, migs)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %v", paths)
	gres, err := migrate.UpgradeGenerators(ctx, c, migrate.GeneratorOptions{DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%+v", gres)
}
