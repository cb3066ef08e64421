package schematest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
	"github.com/shardid/shardid/shardmgr"
)

// A catalog in each of the states a binary must refuse or accept as the
// upgrade policy says (docs/upgrading.md). Each takes an initialised
// cluster's catalog.
const (
	// CatalogNewerAdditive: one migration beyond what this binary knows,
	// additive (a new table), min_reader left alone.
	CatalogNewerAdditive = "newer-additive"
	// CatalogNewerBreaking: one migration beyond, which raises min_reader
	// to itself as a migration that changes what readers read must.
	CatalogNewerBreaking = "newer-breaking"
	// CatalogDirty: this binary's last migration failed half way.
	CatalogDirty = "dirty"
	// CatalogOlder: one migration behind this binary (down to
	// PreviousCatalog).
	CatalogOlder = "older"
)

// PreviousCatalog is the catalog schema before this binary's: the highest
// catalog migration below shardmgr.CatalogSchema (numbers may skip).
var PreviousCatalog = func() int {
	entries, err := fs.ReadDir(migrations.Catalog.FS, ".")
	if err != nil {
		panic(err)
	}
	prev := 0
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.Atoi(num); err == nil && v < shardmgr.CatalogSchema {
			prev = max(prev, v)
		}
	}
	return prev
}()

// CatalogStates lists the states above.
var CatalogStates = []string{CatalogNewerAdditive, CatalogNewerBreaking, CatalogDirty, CatalogOlder}

// SetCatalog brings the catalog at dsn, at this binary's schema, to
// state, with golang-migrate as a newer or failed shardid would.
func SetCatalog(t testing.TB, dsn, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(t.Context(), time.Minute, errors.New("schematest: migrating the test catalog took over a minute"))
	defer cancel()
	next := shardmgr.CatalogSchema + 1
	switch state {
	case CatalogNewerAdditive, CatalogNewerBreaking:
		up := "CREATE TABLE shardid.newer_feature (id integer PRIMARY KEY);"
		if state == CatalogNewerBreaking {
			up += fmt.Sprintf("\nUPDATE shardid.catalog_readers SET min_reader = %d;", next)
		}
		set, err := migrations.Catalog.With(fstest.MapFS{
			fmt.Sprintf("%03d_newer_feature.up.sql", next):   {Data: []byte(up)},
			fmt.Sprintf("%03d_newer_feature.down.sql", next): {Data: []byte("DROP TABLE shardid.newer_feature;")},
		})
		require.NoError(t, err)
		require.NoError(t, migrations.Up(ctx, dsn, set))
	case CatalogDirty:
		// This binary's last migration, run again after a step down, fails
		// on a statement of its own: golang-migrate leaves the version
		// dirty and the schema as it was before the migration.
		require.NoError(t, migrations.To(ctx, dsn, migrations.Catalog, uint(PreviousCatalog)))
		set, err := migrations.Catalog.With(fstest.MapFS{
			fmt.Sprintf("%03d_catalog_readers.up.sql", shardmgr.CatalogSchema): {Data: []byte("SELECT 1/0;")},
		})
		require.NoError(t, err)
		require.Error(t, migrations.Up(ctx, dsn, set))
	case CatalogOlder:
		require.NoError(t, migrations.To(ctx, dsn, migrations.Catalog, uint(PreviousCatalog)))
	default:
		t.Fatalf("unknown catalog state %q", state)
	}
}

// CatalogVersion reads the catalog's version and dirty flag.
func CatalogVersion(t testing.TB, dsn string) (int64, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(t.Context(), 30*time.Second, errors.New("schematest: reading the catalog's version took over 30s"))
	defer cancel()
	v, err := shardmgr.ReadCatalogVersion(ctx, pgtest.Pool(t, dsn))
	require.NoError(t, err)
	return v.Have, v.Dirty
}

// Generation reads the catalog's generation.
func Generation(t testing.TB, dsn string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(t.Context(), 30*time.Second, errors.New("schematest: reading the catalog's generation took over 30s"))
	defer cancel()
	var gen int64
	require.NoError(t, pgtest.Pool(t, dsn).QueryRow(ctx, `SELECT generation FROM shardid.cluster`).Scan(&gen))
	return gen
}
