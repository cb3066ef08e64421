package sql_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	shsql "github.com/shardid/shardid/sql"
)

// generators are the two forms of the safe generator's next_id(): every
// uniqueness test of this package runs against both (forEachGenerator).
var generators = []string{shsql.GeneratorPLpgSQL, shsql.GeneratorC}

// forEachGenerator runs test once per form of next_id(), as a subtest
// named for it. The C form needs the extension in the server: make ext
// (which make test runs first) builds and installs it.
func forEachGenerator(t *testing.T, test func(t *testing.T, gen string)) {
	for _, gen := range generators {
		t.Run(gen, func(t *testing.T) {
			if gen == shsql.GeneratorC {
				pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
			}
			test(t, gen)
		})
	}
}

// createExtension is the SQL that creates the shardid extension in the
// database when gen is the C generator, and nothing otherwise.
func createExtension(gen string) string {
	if gen != shsql.GeneratorC {
		return ""
	}
	return "CREATE EXTENSION IF NOT EXISTS " + shsql.ExtensionName + " VERSION '" + shsql.ExtensionVersion + "';\n"
}

// requireGenerator checks that schema's next_id() is the form gen names
// (auto: either), by its language: a test meant for the C form must not
// pass on the PL/pgSQL one.
func requireGenerator(t *testing.T, pool *pgxpool.Pool, schema string, shard int, gen string) {
	t.Helper()
	if schema == "" {
		schema = shsql.DefaultSchema(shard)
	}
	var lang string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT l.lanname FROM pg_proc p
		JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = $1::regnamespace AND p.proname = 'next_id'`, schema).Scan(&lang))
	switch gen {
	case shsql.GeneratorC:
		require.Equal(t, "c", lang, "%s.next_id() is the C generator (is the extension installed? make ext)", schema)
	case shsql.GeneratorPLpgSQL:
		require.Equal(t, "sql", lang, "%s.next_id() is the PL/pgSQL generator", schema)
	}
}

// drawBatches starts in g one session per element of all: each runs query
// (the batch size its $1) batches times and keeps the ids it returns in
// its element.
func drawBatches(ctx context.Context, g *errgroup.Group, pool *pgxpool.Pool, all [][]int64, batches int, query string, batch int) {
	for s := range all {
		g.Go(func() error {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			for range batches {
				rows, err := conn.Query(ctx, query, batch)
				if err != nil {
					return err
				}
				ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					return err
				}
				all[s] = append(all[s], ids...)
			}
			return nil
		})
	}
}
