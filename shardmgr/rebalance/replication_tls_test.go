package rebalance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// The subscription's conninfo carries the DSN's TLS settings as written,
// URL or keywords: verify-full stays verify-full with its sslrootcert
// (the target's server then checks the source's certificate), and a
// target's server stores them as given (CREATE SUBSCRIPTION ... connect =
// false parses the conninfo without connecting). Failed before: sslmode
// became require and sslrootcert, sslcert and sslkey were dropped.
func TestConnInfoCarriesTLSSettings(t *testing.T) {
	t.Parallel()
	p := clustertest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	// pgx reads the files as it parses the DSN: real ones, at paths with
	// a space.
	dir := filepath.Join(t.TempDir(), "tls files")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	ca, cert, key := filepath.Join(dir, "ca root.pem"), filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	writeSelfSigned(t, ca, key)
	writeSelfSigned(t, cert, key)
	esc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	for i, dsn := range []string{
		"postgres://mover:pw@db1.example:5433/app?sslmode=verify-full&sslrootcert=" + esc(ca) + "&sslcert=" + esc(cert) +
			"&sslkey=" + esc(key) + "&ssl_min_protocol_version=TLSv1.3",
		`host=db1.example port=5433 dbname=app user=mover password=pw sslmode=verify-full sslrootcert='` + ca + `' sslcert='` + cert + `' sslkey='` + key + `' ssl_min_protocol_version=TLSv1.3`,
	} {
		got, err := libpqConnInfo(dsn)
		require.NoError(t, err)
		want := `host='db1.example' port='5433' dbname='app' user='mover' password='pw' sslmode='verify-full' sslrootcert='` + ca + `' sslcert='` + cert + `' sslkey='` + key + `' ssl_min_protocol_version='TLSv1.3'`
		require.Equal(t, want, got, dsn)
		omitted, err := libpqConnInfoWithout(dsn, "password")
		require.NoError(t, err)
		require.NotContains(t, omitted, "password")
		require.Contains(t, omitted, "sslmode='verify-full' sslrootcert='"+ca+"'")

		sub := pgx.Identifier{fmt.Sprintf("tls_%d", i)}.Sanitize()
		_, err = p.Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION p WITH (connect = false)`, sub, pg.QuoteLiteral(got)))
		require.NoError(t, err)
		var stored string
		require.NoError(t, p.QueryRow(clustertest.Ctx(t), `SELECT subconninfo FROM pg_subscription WHERE subname = $1`, fmt.Sprintf("tls_%d", i)).Scan(&stored))
		require.Equal(t, got, stored)
		_, err = p.Exec(clustertest.Ctx(t), `ALTER SUBSCRIPTION `+sub+` SET (slot_name = NONE); DROP SUBSCRIPTION `+sub)
		require.NoError(t, err)
	}
	// Without sslmode, the mode pgx settled on, as before.
	got, err := libpqConnInfo("postgres://u@h/d?sslmode=disable")
	require.NoError(t, err)
	require.Equal(t, `host='h' port='5432' dbname='d' user='u' sslmode='disable'`, got)
	got, err = libpqConnInfo("host=h user=u dbname=d")
	require.NoError(t, err)
	require.Equal(t, `host='h' port='5432' dbname='d' user='u' sslmode='prefer'`, got)
}

// ConnInfoPasswordOmit leaves the source's password out of the target's
// pg_subscription when the subscription's owner is a superuser; where the
// mover's role on the target is not one, it is refused before anything
// is copied (PostgreSQL 16 and later require a password in a
// non-superuser's subscription).
func TestMoveConnInfoPasswordOmit(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	// The servers trust local connections: a password in the DSN travels
	// but is not checked.
	for i := range cfg.Hosts {
		cfg.Hosts[i].DSN = withPassword(t, cfg.Hosts[i].DSN, "s3cret-pw")
	}
	m := clustertest.ClusterMap(t, cfg)
	const shard = 1
	to := "pg1"
	if m.Shards[shard].Host == to {
		to = "pg2"
	}
	opts := MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration), ConnInfoPassword: ConnInfoPasswordOmit}
	opts.stopAfter = PhaseCopy
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, to, opts)
	require.ErrorIs(t, err, errStopped)
	var conninfo string
	require.NoError(t, clustertest.HostPool(t, cfg, to).QueryRow(clustertest.Ctx(t), `SELECT subconninfo FROM pg_subscription
		WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&conninfo))
	require.NotContains(t, conninfo, "password")
	require.NotContains(t, conninfo, "s3cret-pw")
	opts.stopAfter = ""
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, to, opts)
	require.NoError(t, err)

	// A mover that is not a superuser on the target: refused.
	role := clustertest.Role(t, cfg, "nosuper")
	h, _ := cfg.Host(to)
	mo := &mover{opts: MoveOptions{ConnInfoPassword: ConnInfoPasswordOmit}}
	err = mo.checkConnInfoPassword(clustertest.Ctx(t), clustertest.Pool(t, clustertest.AsRole(t, h.DSN, role)), to)
	require.ErrorIs(t, err, ErrConnInfoPasswordNeeded)
	require.ErrorContains(t, err, "role "+role+", is not a superuser (PostgreSQL 16 and later require a password")
	mo.opts.ConnInfoPassword = ConnInfoPasswordInclude
	require.NoError(t, mo.checkConnInfoPassword(clustertest.Ctx(t), clustertest.Pool(t, clustertest.AsRole(t, h.DSN, role)), to))
}

// writeSelfSigned writes a self-signed certificate to certPath and its key
// to keyPath (PEM).
func writeSelfSigned(t *testing.T, certPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "db1.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kd, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600))
}
