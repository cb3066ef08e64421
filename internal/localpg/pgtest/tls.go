package pgtest

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
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/internal/localpg"
)

// TLS is a certificate authority of a test's own and a server
// certificate it signs for 127.0.0.1, in a directory the servers' user
// may read (removed when the test ends).
type TLS struct {
	// Dir holds ca.crt, server.crt and server.key.
	Dir string
}

// CA is the path of the authority's certificate, for a DSN's sslrootcert.
func (c TLS) CA() string { return filepath.Join(c.Dir, "ca.crt") }

// NewTLS writes a new authority and a server certificate it signs.
func NewTLS(t testing.TB) TLS {
	t.Helper()
	dir, err := os.MkdirTemp("", "shardid-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(dir, 0o755))
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(err)
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shardid test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	must(err)
	caCert, err := x509.ParseCertificate(caDER)
	must(err)
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	must(err)
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	must(err)
	write := func(name, typ string, der []byte, mode os.FileMode) {
		p := filepath.Join(dir, name)
		must(os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode))
		if os.Geteuid() == 0 { // the servers run as postgres, who must own its key
			u, err := user.Lookup("postgres")
			must(err)
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			must(os.Chown(p, uid, gid))
		}
	}
	write("ca.crt", "CERTIFICATE", caDER, 0o644)
	write("server.crt", "CERTIFICATE", srvDER, 0o644)
	write("server.key", "EC PRIVATE KEY", srvKeyDER, 0o600)
	return TLS{Dir: dir}
}

// Server starts a server of this test's own with TLS on (c's server
// certificate), on which role, a superuser it creates, may connect
// (sessions and replication) only over TLS; the servers' own postgres
// connects as before. A standby made from it (NewAsyncStandby) keeps
// both: its settings and its pg_hba.conf.
func (c TLS) Server(t testing.TB, role string) *localpg.Server {
	t.Helper()
	s := Own(t, localpg.Options{Settings: map[string]string{
		"ssl": "on", "ssl_cert_file": "'" + filepath.Join(c.Dir, "server.crt") + "'", "ssl_key_file": "'" + filepath.Join(c.Dir, "server.key") + "'",
		"wal_retrieve_retry_interval": "100ms"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN SUPERUSER`); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(s.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	rules := fmt.Sprintf("hostssl all %[1]s 127.0.0.1/32 trust\nhostssl replication %[1]s 127.0.0.1/32 trust\nhost all %[1]s 127.0.0.1/32 reject\nhost replication %[1]s 127.0.0.1/32 reject\n", role)
	if err := os.WriteFile(hba, append([]byte(rules), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	return s
}

// DSN is a DSN of database db on s as role, with sslmode=verify-full and
// c's authority as sslrootcert.
func (c TLS) DSN(s *localpg.Server, role, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=verify-full&sslrootcert=%s", role, s.Port, db, url.QueryEscape(c.CA()))
}

// RequireTLSOnly fails the test unless role is refused on s without TLS:
// what a test does as role then goes over TLS.
func RequireTLSOnly(t testing.TB, s *localpg.Server, role string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", role, s.Port))
	if err == nil {
		c.Close(context.Background())
		t.Fatalf("role %s connected without TLS", role)
	}
	if !strings.Contains(err.Error(), "pg_hba.conf rejects connection") {
		t.Fatalf("role %s without TLS: %v, want pg_hba.conf's rejection", role, err)
	}
}
