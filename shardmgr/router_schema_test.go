package shardmgr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/schematest"
	"github.com/shardid/shardid/shardmgr"
)

// Open reads the catalog's schema version first: it reads a catalog one
// migration newer when that migration is additive, and an older one; it
// refuses a dirty catalog and a newer one that raised its min_reader, with
// one line naming both versions.
func TestOpenChecksCatalogSchema(t *testing.T) {
	t.Parallel()
	cases := []struct {
		state string
		want  error // nil: Open reads the catalog and routes
		text  string
	}{
		{schematest.CatalogNewerAdditive, nil, ""},
		{schematest.CatalogNewerBreaking, shardmgr.ErrCatalogTooNew, fmt.Sprintf("this catalog was upgraded to schema %d by a newer shardid; this binary knows %d", shardmgr.CatalogSchema+1, shardmgr.CatalogSchema)},
		{schematest.CatalogDirty, shardmgr.ErrCatalogDirty, fmt.Sprintf("this catalog is dirty at schema %[1]d: migration %[1]d failed half way; this binary knows %[1]d", shardmgr.CatalogSchema)},
		{schematest.CatalogOlder, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			cfg := initCluster(t, 4)
			schematest.SetCatalog(t, cfg.Catalog, tc.state)
			r, err := shardmgr.Open(ctx(t), cfg)
			if tc.want == nil {
				require.NoError(t, err)
				defer r.Close()
				require.NoError(t, r.Tx(ctx(t), 1, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
					_, err := tx.Exec(ctx, "SELECT "+s.NextID())
					return err
				}))
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.EqualError(t, err, tc.text)
			var ve *shardmgr.CatalogVersionError
			require.True(t, errors.As(err, &ve))
			require.EqualValues(t, shardmgr.CatalogSchema, ve.Want)
		})
	}
}

// A router already serving keeps its last map when the catalog becomes one
// it may not read: the reload fails (as when the catalog is unreachable)
// and routing goes on.
func TestRouterKeepsMapWhenCatalogTooNew(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(-1))
	gen := r.Generation()
	schematest.SetCatalog(t, cfg.Catalog, schematest.CatalogNewerBreaking)
	_, err := pool(t, cfg.Catalog).Exec(ctx(t), `UPDATE shardid.cluster SET generation = generation + 1`)
	require.NoError(t, err)
	_, err = r.Reload(ctx(t))
	require.ErrorIs(t, err, shardmgr.ErrCatalogTooNew)
	require.Equal(t, gen, r.Generation())
	require.NoError(t, r.Tx(ctx(t), 2, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		_, err := tx.Exec(ctx, "SELECT "+s.NextID())
		return err
	}))
}
