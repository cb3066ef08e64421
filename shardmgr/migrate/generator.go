package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	shsql "github.com/shardid/shardid/sql"
)

// DefaultGeneratorLockTimeout bounds the wait for the write lock on a
// shard's tables unless GeneratorOptions.LockTimeout says.
const DefaultGeneratorLockTimeout = 10 * time.Second

// GeneratorOptions adjust UpgradeGenerators. The zero value upgrades every
// shard with DefaultMigrateWorkers connections per host.
type GeneratorOptions struct {
	// Shards limits the upgrade to these logical shards. Zero means all.
	Shards []int
	// Workers is the number of connections per host. Zero means
	// DefaultMigrateWorkers (4).
	Workers int
	// DryRun reports what would be upgraded and changes nothing.
	DryRun bool
	// LockTimeout bounds the wait for the write lock on a shard's tables;
	// the shard fails (and can be retried) rather than queueing every
	// writer behind a long transaction. Zero means
	// DefaultGeneratorLockTimeout (10s).
	LockTimeout time.Duration
	// Generator is the form of next_id() to install (sql.Params.Generator).
	// Empty means the cluster file's (generator:, auto when it names none).
	Generator string
	// LockWait is as in Options.
	LockWait time.Duration
	// Progress and Waiting are as in Options.
	Progress func(HostProgress)
	Waiting  func(LockWait)
	// Logger receives a line per shard upgraded. Zero means the handle's logger
	// (cluster.WithLogger).
	Logger *slog.Logger
}

// GeneratorResult is what UpgradeGenerators did, per shard.
type GeneratorResult struct {
	// Shards holds one entry per shard, ascending by id.
	Shards []GeneratorUpgrade `json:"shards"`
	// Elapsed is the wall time of the upgrade.
	Elapsed time.Duration `json:"-"`
}

// GeneratorUpgrade is one shard's generator before and after.
type GeneratorUpgrade struct {
	// ID is the logical shard; Host the host that holds it.
	ID   int    `json:"id"`
	Host string `json:"host"`
	// From is the marker found; To the marker of this release's generator.
	From string `json:"from"`
	To   string `json:"to"`
	// Upgraded is set when the generator was (or, in a dry run, would be)
	// re-installed.
	Upgraded bool `json:"upgraded"`
	// MaxID is the highest id stored in a column whose DEFAULT calls the
	// shard's next_id(), but for forged ones; the counter was carried past
	// it. Zero when none.
	MaxID int64 `json:"max_id,omitempty"`
	// ForgedIDs counts the stored ids whose time lies beyond the host's
	// clock plus the margin of next_id_advance (sql.AdvanceMarginMS): no
	// generator of the cluster made them, and the counter was not carried
	// past them (shardid verify says where they are).
	ForgedIDs int64    `json:"forged_ids,omitempty"`
	Columns   []string `json:"columns,omitempty"` // table.column
	// Err is why the shard was not upgraded (JSON: its message, "error").
	Err error `json:"-"`
}

// MarshalJSON writes Err as its message under "error".
func (u GeneratorUpgrade) MarshalJSON() ([]byte, error) {
	type plain GeneratorUpgrade
	return json.Marshal(struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain(u), pg.ErrorText(u.Err)})
}

// Counts sums a result up: upgraded, unchanged, failed.
func (r *GeneratorResult) Counts() (upgraded, unchanged, failed int) {
	for _, s := range r.Shards {
		switch {
		case s.Err != nil:
			failed++
		case s.Upgraded:
			upgraded++
		default:
			unchanged++
		}
	}
	return
}

// UpgradeGenerators re-installs this release's generator (sql.Render with
// the catalog's variant and layout) in every shard whose installed marker
// differs: an older generator version, or another variant (Instagram's).
// The counter is never reset: in one transaction per shard, writes to the
// tables whose id columns default to the shard's next_id() are locked out,
// the highest id stored there is read, the generator is re-installed and
// the counter is carried past that id (next_id_advance), so every id after
// the upgrade is greater than every id before. Ids stored in columns
// without such a DEFAULT are not seen, nor forged ones: ids whose time lies
// beyond the host's clock plus the advance's margin (ForgedIDs), which no
// generator made and which, carried over, would burn or exhaust the counter.
//
// A generator for another shard, epoch or layout is never replaced
// (ErrForeignGenerator). Shards already current keep their generator and
// counter: the install SQL is run on them again, which changes nothing but
// what an older install SQL of the same version left behind (privileges:
// next_id_advance is the owner's only, docs/uniqueness.md#privileges).
// Failed shards are listed in a *shardmgr.ShardErrors returned with the
// result.
func UpgradeGenerators(ctx context.Context, c *cluster.Cluster, opts GeneratorOptions) (*GeneratorResult, error) {
	start := time.Now()
	if opts.Workers <= 0 {
		opts.Workers = DefaultMigrateWorkers
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultGeneratorLockTimeout
	}
	if opts.Generator == "" {
		opts.Generator = c.Config().Generator
	}
	log := opts.Logger
	if log == nil {
		log = c.Logger()
	}
	m, err := c.Map(ctx, shardmgr.UseWrite)
	if err != nil {
		return nil, err
	}
	shards, err := selectShards(m, opts.Shards)
	if err != nil {
		return nil, err
	}
	if _, err := hostsOf(c.Config(), shards); err != nil {
		return nil, err
	}
	f := fanOut[GeneratorUpgrade]{
		op: "generator upgrade", workers: opts.Workers, progress: opts.Progress, waiting: opts.Waiting,
		outcome: func(r GeneratorUpgrade) (int, string, error, bool) {
			if r.Err != nil {
				return r.ID, r.Host, &shardmgr.ShardError{Shard: r.ID, Host: r.Host, Err: r.Err}, false
			}
			return r.ID, r.Host, nil, false
		},
		done: func(r GeneratorUpgrade) {
			if r.Err != nil {
				log.Warn("generator upgrade failed", "shard", r.ID, "host", r.Host, "err", r.Err)
			} else if r.Upgraded {
				log.Info("generator upgraded", "shard", r.ID, "host", r.Host, "from", r.From, "to", r.To, "max_id", r.MaxID)
			}
			if r.ForgedIDs > 0 {
				log.Warn("stored ids beyond the clock were not carried over: no generator made them (run shardid verify)", "shard", r.ID, "host", r.Host, "ids", r.ForgedIDs)
			}
		},
	}
	results, err := f.run(ctx, c, shards, func(host string, sh shardmgr.Shard, conn func() (*pgx.Conn, error), waiting func(LockWait), _ *atomic.Bool) GeneratorUpgrade {
		r := GeneratorUpgrade{ID: sh.ID, Host: host}
		c, err := conn()
		if err == nil {
			err = upgradeGenerator(ctx, c, m, sh, opts, waiting, &r)
		}
		r.Err = err
		return r
	})
	return &GeneratorResult{Shards: results, Elapsed: time.Since(start)}, err
}

// upgradeGenerator upgrades one shard's generator under the shard's
// migration lock, filling r.
func upgradeGenerator(ctx context.Context, conn *pgx.Conn, m *shardmgr.ShardMap, sh shardmgr.Shard, opts GeneratorOptions, waiting func(LockWait), r *GeneratorUpgrade) error {
	unlock, err := lockShard(ctx, conn, r.Host, sh.ID, opts.LockWait, waiting)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer unlock()

	p := catalog.GeneratorParams(m, sh.ID)
	p.Generator = opts.Generator
	want, err := shsql.Marker(p)
	if err != nil {
		return err
	}
	r.To = want
	fn := pgx.Identifier{sh.Schema, shsql.FunctionName}.Sanitize() + "()"
	var found bool
	if err := conn.QueryRow(ctx, `SELECT to_regprocedure($1) IS NOT NULL, coalesce(pg_catalog.obj_description(to_regprocedure($1), 'pg_proc'), '')`,
		fn).Scan(&found, &r.From); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: no %s", ErrNoGenerator, fn)
	}
	if r.From == want {
		if opts.DryRun {
			return nil
		}
		return reapplyGenerator(ctx, conn, p, opts.LockTimeout)
	}
	have, haveVersion, err := shsql.ParseMarker(r.From)
	if err != nil {
		return fmt.Errorf("%w: %s has no shardid marker (%q)", ErrForeignGenerator, fn, r.From)
	}
	if haveVersion > shsql.Version {
		// Replacing it would downgrade it: a newer shardid's generator
		// may keep state this one does not carry over.
		return fmt.Errorf("%w: %s is generator v%d; this binary writes v%d", ErrGeneratorTooNew, fn, haveVersion, shsql.Version)
	}
	wantP, _, _ := shsql.ParseMarker(want)
	if have.Shard != wantP.Shard || have.Epoch != wantP.Epoch || have.TimeBits != wantP.TimeBits || have.ShardBits != wantP.ShardBits || have.SeqBits != wantP.SeqBits {
		return fmt.Errorf("%w: installed %q, the catalog expects %q: shard, epoch and layout must not change", ErrForeignGenerator, r.From, want)
	}
	ddl, err := shsql.Render(p)
	if err != nil {
		return err
	}
	if opts.DryRun {
		r.Upgraded = true
		return nil
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, opts.LockTimeout.Milliseconds())); err != nil {
			return err
		}
		cols, err := shardschema.IDColumns(ctx, tx, sh.Schema)
		if err != nil {
			return err
		}
		tables := []string{}
		for _, c := range cols {
			if !slices.Contains(tables, c.Table) {
				tables = append(tables, c.Table)
			}
			r.Columns = append(r.Columns, c.String())
		}
		if len(tables) > 0 {
			// EXCLUSIVE: reads go on, writes wait, so no id is taken from the
			// old generator between reading the maximum and advancing.
			if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(tables, ", ")+` IN EXCLUSIVE MODE`); err != nil {
				return fmt.Errorf("lock the tables using %s: %w", fn, err)
			}
		}
		// Ids beyond the host's clock plus the margin next_id_advance allows
		// without force were not handed out by a generator of this cluster
		// (written with an explicit id, docs/uniqueness.md#forged-ids): the
		// counter is not carried past them, which could exhaust it.
		var nowMS int64
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000)::bigint`).Scan(&nowMS); err != nil {
			return err
		}
		ceiling := shardschema.CeilingID(m.Layout, nowMS+shsql.AdvanceMarginMS)
		for _, c := range cols {
			mx, err := shardschema.MaxIDUpTo(ctx, tx, c, ceiling)
			if err != nil {
				return fmt.Errorf("max(%s) of %s: %w", c.Column, c.Table, err)
			}
			if mx != nil && *mx > r.MaxID {
				r.MaxID = *mx
			}
			b, err := shardschema.IDsBeyond(ctx, tx, c, ceiling, 1<<62)
			if err != nil {
				return fmt.Errorf("ids of %s beyond the clock: %w", c, err)
			}
			r.ForgedIDs += b.Count
		}
		if _, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("install generator: %w", err)
		}
		if r.MaxID > 0 && p.Variant != shsql.Instagram {
			// No force: the floor lies within the margin of the clock.
			advance := pgx.Identifier{sh.Schema, shsql.AdvanceName}.Sanitize()
			if _, err := tx.Exec(ctx, `SELECT `+advance+`($1)`, r.MaxID); err != nil {
				return fmt.Errorf("carry the counter past %d: %w", r.MaxID, err)
			}
		}
		return nil
	})
	r.Upgraded = err == nil
	return err
}

// reapplyGenerator runs the install SQL again on a shard whose generator
// is current. It is idempotent (the counter is kept), so no table lock or
// carry-over is needed; it brings the functions and their privileges to
// this release's, which an installation of the same generator version made
// by an older release may lack (PUBLIC could execute next_id_advance).
func reapplyGenerator(ctx context.Context, conn *pgx.Conn, p shsql.Params, lockTimeout time.Duration) error {
	ddl, err := shsql.Render(p)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = %d`,
			lockTimeout.Milliseconds(), (lockTimeout+time.Minute).Milliseconds())); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddl, pgx.QueryExecModeSimpleProtocol)
		return err
	})
	if err != nil {
		return fmt.Errorf("re-apply the install SQL: %w", err)
	}
	return nil
}
