package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
	"github.com/shardid/shardid/shardmgr/internal/engine/hostidentity"
)

// hostClaim is what a host's database says about who owns it.
type hostClaim struct {
	name, cluster, as, identity string
	shards                      int
}

// checkCatalogOwnsHosts refuses, before Init creates anything (not even a
// database), a catalog that cannot be the hosts' own:
//   - a catalog whose database does not exist or holds no cluster, while
//     a host records that it belongs to a cluster (ErrCatalogEmpty): a
//     mistyped catalog address would otherwise get a new cluster, placed
//     anew, with live generators in new schemas beside the hosts' shards;
//     a catalog left empty by a failed restore the same;
//   - a host whose record names another cluster identity than the
//     catalog's (ErrOtherCatalog): it belongs to another catalog;
//   - a host whose record names another cluster, or another host
//     (shardmgr.ErrClusterMismatch).
//
// Hosts whose database does not exist yet, or records nothing, are new.
func checkCatalogOwnsHosts(ctx context.Context, c *cluster.Cluster) error {
	cfg := c.Config()
	catKey, _ := pg.DatabaseKey(cfg.Catalog)
	exists, hasCluster, identity, err := readCatalogClaim(ctx, c)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	var claims []hostClaim
	for _, h := range cfg.Hosts {
		cl, err := readHostClaim(ctx, c, h.Name)
		if err != nil {
			return fmt.Errorf("host %s: read its record: %w", h.Name, err)
		}
		if cl.cluster != "" {
			claims = append(claims, cl)
		}
	}
	// A host of another cluster, or recorded as another host: the
	// catalog cannot be its own, whatever it holds.
	var probs []string
	for _, cl := range claims {
		if cl.cluster != cfg.Cluster || cl.as != cl.name {
			probs = append(probs, fmt.Sprintf("host %s: its database belongs to cluster %q as host %q", cl.name, cl.cluster, cl.as))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", shardmgr.ErrClusterMismatch, strings.Join(probs, "; "))
	}
	if !hasCluster {
		if len(claims) == 0 {
			return nil
		}
		what := "holds no cluster"
		if !exists {
			what = "does not exist"
		}
		parts := make([]string, len(claims))
		for i, cl := range claims {
			parts[i] = fmt.Sprintf("host %s records %d shards of cluster %q", cl.name, cl.shards, cl.cluster)
			if cl.identity != "" {
				parts[i] += " (identity " + cl.identity + ")"
			}
		}
		return fmt.Errorf("%w: the catalog database %s %s, but %s; nothing was created", ErrCatalogEmpty, catKey, what, strings.Join(parts, "; "))
	}
	if identity == "" {
		return nil // a catalog of an older schema: init gives it one
	}
	for _, cl := range claims {
		if cl.identity != "" && cl.identity != identity {
			probs = append(probs, fmt.Sprintf("host %s records cluster %q of identity %s", cl.name, cl.cluster, cl.identity))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: the catalog %s holds cluster identity %s, but %s; nothing was changed", ErrOtherCatalog, catKey, identity, strings.Join(probs, "; "))
	}
	return nil
}

// readCatalogClaim reads whether the catalog's database exists, holds a
// cluster, and the cluster's identity ("" when it records none).
func readCatalogClaim(ctx context.Context, c *cluster.Cluster) (exists, hasCluster bool, identity string, err error) {
	conn, err := acquire(ctx, c, "")
	if isMissingDatabase(err) {
		return false, false, "", nil
	}
	if err != nil {
		return false, false, "", err
	}
	defer conn.Release()
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM shardid.cluster`).Scan(&n)
	var pe *pgconn.PgError
	if pg.IsUndefinedTable(err) || errors.As(err, &pe) && pe.Code == pgerrcode.InvalidSchemaName {
		return true, false, "", nil
	}
	if err != nil || n == 0 {
		return true, false, "", err
	}
	identity, err = catalog.ReadIdentity(ctx, conn)
	return true, true, identity, err
}

// readHostClaim reads what host name's database records of its owner;
// nothing when the database does not exist yet.
func readHostClaim(ctx context.Context, c *cluster.Cluster, name string) (hostClaim, error) {
	cl := hostClaim{name: name}
	conn, err := acquire(ctx, c, name)
	if isMissingDatabase(err) {
		return cl, nil
	}
	if err != nil {
		return cl, err
	}
	defer conn.Release()
	if cl.cluster, cl.as, err = readHostInfo(ctx, conn.Conn()); err != nil || cl.cluster == "" {
		return cl, err
	}
	if cl.identity, err = hostidentity.ReadIdentity(ctx, conn); err != nil {
		return cl, err
	}
	err = conn.QueryRow(ctx, `SELECT count(*) FROM shardid.local_shards WHERE state <> 'fenced'`).Scan(&cl.shards)
	if pg.IsUndefinedTable(err) {
		err = nil
	}
	return cl, err
}

func isMissingDatabase(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgerrcode.InvalidCatalogName
}

// recordHostIdentity writes, on host name's database (pool), the
// catalog's cluster identity where it records none, and a secret whose
// hash the catalog records (cat) where either has none. A host recording
// another identity is ErrOtherCatalog; one holding another secret than
// the catalog recorded, hostidentity.ErrSecretMismatch.
func recordHostIdentity(ctx context.Context, pool *pgxpool.Pool, cat *pgxpool.Pool, name, identity string) error {
	got, err := hostidentity.WriteIdentity(ctx, pool, identity)
	if err != nil {
		return fmt.Errorf("record the cluster identity: %w", err)
	}
	if got != identity {
		return fmt.Errorf("%w: it records cluster identity %s, the catalog's is %s", ErrOtherCatalog, got, identity)
	}
	secret, err := hostidentity.ReadSecret(ctx, pool)
	if err != nil {
		return fmt.Errorf("read its secret: %w", err)
	}
	want, err := catalog.ReadHostSecretHash(ctx, cat, name)
	if err != nil {
		return fmt.Errorf("catalog: read its secret's hash: %w", err)
	}
	var hash []byte
	switch {
	case secret == nil:
		if hash, err = hostidentity.NewSecret(ctx, pool); err != nil {
			return fmt.Errorf("write its secret: %w", err)
		}
	case want == nil:
		hash = hostidentity.Hash(secret) // a host of an older catalog schema
	case !bytes.Equal(hostidentity.Hash(secret), want):
		return fmt.Errorf("%w (shardid.host_secret holds another than the one the catalog recorded)", hostidentity.ErrSecretMismatch)
	default:
		return nil
	}
	if err := catalog.PutHostSecretHash(ctx, cat, name, hash); err != nil {
		return fmt.Errorf("catalog: record its secret's hash: %w", err)
	}
	return nil
}

// readClusterIdentity is the catalog's cluster identity (catalog
// migration 16 gives every cluster one; init's catalog is at that schema).
func readClusterIdentity(ctx context.Context, cat *pgxpool.Pool) (string, error) {
	id, err := catalog.ReadIdentity(ctx, cat)
	if err == nil && id == "" {
		err = errors.New("the catalog records none")
	}
	return id, err
}
