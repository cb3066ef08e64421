package rebalance

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/clustertest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// tlsFiles writes a CA and a server certificate it signs for 127.0.0.1
// into a directory the servers' user may read, and returns the directory.
func tlsFiles(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shardid-tls-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shardid test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	require.NoError(t, err)
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	require.NoError(t, err)
	write := func(name, typ string, der []byte, mode os.FileMode) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode))
		if os.Geteuid() == 0 { // the servers run as postgres, who must own its key
			u, err := user.Lookup("postgres")
			require.NoError(t, err)
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			require.NoError(t, os.Chown(p, uid, gid))
		}
	}
	write("ca.crt", "CERTIFICATE", caDER, 0o644)
	write("server.crt", "CERTIFICATE", srvDER, 0o644)
	write("server.key", "EC PRIVATE KEY", srvKeyDER, 0o600)
	return dir
}

// tlsServer starts a server of this test's own with TLS on, on which role
// may connect (sessions and replication) only over TLS.
func tlsServer(t *testing.T, dir, role string) *localpg.Server {
	t.Helper()
	ctx := clustertest.Ctx(t)
	s := pgtest.Own(t, localpg.Options{Settings: map[string]string{
		"ssl": "on", "ssl_cert_file": "'" + filepath.Join(dir, "server.crt") + "'", "ssl_key_file": "'" + filepath.Join(dir, "server.key") + "'",
		"wal_retrieve_retry_interval": "100ms"}})
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN SUPERUSER`)
	require.NoError(t, err)
	hba := filepath.Join(s.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	require.NoError(t, err)
	rules := fmt.Sprintf("hostssl all %[1]s 127.0.0.1/32 trust\nhostssl replication %[1]s 127.0.0.1/32 trust\nhost all %[1]s 127.0.0.1/32 reject\nhost replication %[1]s 127.0.0.1/32 reject\n", role)
	require.NoError(t, os.WriteFile(hba, append([]byte(rules), old...), 0o600))
	_, err = admin.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	return s
}

// Over TLS with sslmode=verify-full (the servers' certificate signed by a
// CA of the test's own, the role refused without TLS): init, migrate, the
// router, an online move (the target's subscription connects to the
// source with verify-full and the CA), an offline move back and a deep
// verify work; a DSN with another CA is refused before init changes
// anything.
func TestClusterOverVerifyFullTLS(t *testing.T) {
	t.Parallel()
	dir := tlsFiles(t)
	n := clustertest.DBCounter.Add(1)
	role := fmt.Sprintf("tls_%d", n)
	s1, s2 := tlsServer(t, dir, role), tlsServer(t, dir, role)
	dsn := func(s *localpg.Server, db, rootcert string) string {
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=verify-full&sslrootcert=%s", role, s.Port, db, url.QueryEscape(rootcert))
	}
	ctx := clustertest.Ctx(t)
	// Without TLS the role is refused: what follows went over TLS.
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", role, s1.Port))
	if err == nil {
		c.Close(context.Background())
	}
	require.ErrorContains(t, err, "pg_hba.conf rejects connection")

	ca := filepath.Join(dir, "ca.crt")
	cfg := &shardmgr.Config{Cluster: fmt.Sprintf("c%d", n), Shards: 4, Path: "test.yaml", Catalog: dsn(s1, fmt.Sprintf("tls%d_catalog", n), ca),
		Hosts: []shardmgr.Host{{Name: "pg1", DSN: dsn(s1, fmt.Sprintf("tls%d_app1", n), ca)}, {Name: "pg2", DSN: dsn(s2, fmt.Sprintf("tls%d_app2", n), ca)}}}
	require.NoError(t, cfg.ValidateCluster())

	// Another CA: refused, nothing created.
	other := tlsFiles(t)
	bad := *cfg
	bad.Catalog = dsn(s1, fmt.Sprintf("tls%d_catalog", n), filepath.Join(other, "ca.crt"))
	bad.Hosts = []shardmgr.Host{{Name: "pg1", DSN: dsn(s1, fmt.Sprintf("tls%d_app1", n), filepath.Join(other, "ca.crt"))},
		{Name: "pg2", DSN: dsn(s2, fmt.Sprintf("tls%d_app2", n), filepath.Join(other, "ca.crt"))}}
	_, err = install.Init(ctx, clustertest.Handle(t, &bad), install.InitOptions{})
	require.ErrorContains(t, err, "certificate")
	var dbs int
	require.NoError(t, clustertest.Pool(t, s1.DSN("postgres")).QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE $1`, fmt.Sprintf("tls%d_%%", n)).Scan(&dbs))
	require.Zero(t, dbs, "nothing created through a certificate of another CA")

	_, err = install.Init(ctx, clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	m := clustertest.ClusterMap(t, cfg)
	shard := 0
	for m.Shards[shard].Host != "pg1" {
		shard++
	}
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond))
	routeLikes(t, r, shard, 300)
	before := likeIDs(t, cfg, shard)

	res, err := MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg2", MoveOptions{Migrations: sampleSet(t), Logger: testLogger(t)})
	require.NoError(t, err)
	require.Equal(t, MoveOnline, res.Mode)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, "pg2", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
	routeLikes(t, r, shard, 10)
	after := likeIDs(t, cfg, shard)
	require.Len(t, after, 310)
	require.Subset(t, after, before)
	requireVerifyOK(t, cfg)

	// And back, offline.
	res, err = MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg1", MoveOptions{Mode: MoveOffline, Migrations: sampleSet(t), Logger: testLogger(t)})
	require.NoError(t, err)
	require.Equal(t, PhaseCleaned, res.Phase)
	require.Equal(t, "pg1", clustertest.ClusterMap(t, cfg).Shards[shard].Host)
	require.Equal(t, after, likeIDs(t, cfg, shard))
	requireVerifyOK(t, cfg)
}
