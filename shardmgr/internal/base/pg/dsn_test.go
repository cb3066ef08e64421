package pg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

var stripCases = []struct{ in, want string }{
	{"postgres://app:s3cret@db1:5432/app?sslmode=disable", "postgres://app@db1:5432/app?sslmode=disable"},
	{"postgresql://app:s3cret@db1/app", "postgresql://app@db1/app"},
	{"postgres://app:p@ss@db1/app", "postgres://app@ss@db1/app"}, // libpq: the first '@' ends the userinfo
	{"postgres://app:p%40ss@db1/app", "postgres://app@db1/app"},
	{"postgres://:#000@", "postgres://@"},
	{"postgres://db1/app?pass%77ord=s3cret&x=1", "postgres://db1/app?x=1"},
	{"postgres://db1?password=s3cret", "postgres://db1"},
	{"postgres://app:p%40ss@db1,db2:5433/app", "postgres://app@db1,db2:5433/app"},
	{"postgres://app:@db1/app", "postgres://app@db1/app"},
	{"postgres://app@db1:5432/app", "postgres://app@db1:5432/app"},
	{"postgres://db1:5432/app", "postgres://db1:5432/app"},
	{"postgres://app:${PG_PASSWORD}@db1/app", "postgres://app:${PG_PASSWORD}@db1/app"},
	{"postgres://${USER}:${PASS}@db1/app", "postgres://${USER}:${PASS}@db1/app"},
	{"postgres://${USER}:x${PASS}@db1/app", "postgres://${USER}@db1/app"},
	{"postgres://app@db1/app?password=s3cret", "postgres://app@db1/app"},
	{"postgres://app@db1/app?password=s3cret&sslmode=disable", "postgres://app@db1/app?sslmode=disable"},
	{"postgres://app@db1/app?sslmode=disable&password=s3cret", "postgres://app@db1/app?sslmode=disable"},
	{"postgres://app@db1/app?sslmode=require&sslpassword=k3y&password=s3cret&application_name=x", "postgres://app@db1/app?sslmode=require&application_name=x"},
	{"postgres://app:a@db1/app?password=b", "postgres://app@db1/app"},
	{"postgres://app@db1/app?password=${PW}", "postgres://app@db1/app?password=${PW}"},
	{"host=db1 user=app password=s3cret dbname=app", "host=db1 user=app dbname=app"},
	{"password=s3cret host=db1", "host=db1"},
	{"host=db1 password = 's3 cr\\'et' port=5432", "host=db1 port=5432"},
	{"host=db1\tpassword=s\\ 3cret\tdbname=app", "host=db1 dbname=app"},
	{"host='a'password=s3cret port=1", "host='a' port=1"},
	{"host=db1 password='unterminated", Unparsable},
	{"host=db1 s3cret", Unparsable},
	{"postgres://app:s3cret@db1:port/app", Unparsable},
	{"postgres://app:s3 cret@db1/app", Unparsable},
	{"host=db1 password=a sslpassword=b port=1", "host=db1 port=1"},
	{"host=db1 password=${PW}", "host=db1 password=${PW}"},
	{"host=db1 password='${PW}'", "host=db1 password='${PW}'"},
	{"host=db1 passfile=/p dbname=app", "host=db1 passfile=/p dbname=app"},
	{"host=db1 application_name=password dbname=app", "host=db1 application_name=password dbname=app"},
	{"", ""},
}

func TestStripPassword(t *testing.T) {
	noAmbientPassword(t)
	for _, c := range stripCases {
		got := StripPassword(c.in)
		require.Equal(t, c.want, got, c.in)
		if got != Unparsable {
			require.Equal(t, got, StripPassword(got), "twice: %s", c.in)
		}
		if c.in != "" && got != Unparsable {
			sameButPassword(t, c.in, got)
		}
	}
}

// noAmbientPassword keeps PGPASSWORD and ~/.pgpass out of pgconn's view.
func noAmbientPassword(t testing.TB) {
	t.Setenv("PGPASSWORD", "")
	os.Unsetenv("PGPASSWORD")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
}

// sameButPassword checks, with pgconn's own parser, that stripped names
// the same servers, database, user and settings as dsn, with no password
// left unless it is a ${VAR} reference.
func sameButPassword(t testing.TB, dsn, stripped string) {
	t.Helper()
	a, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return // not a DSN: nothing to compare
	}
	b, err := pgconn.ParseConfig(stripped)
	require.NoError(t, err, "%q stripped to %q", dsn, stripped)
	require.Equal(t, a.Host, b.Host, dsn)
	require.Equal(t, a.Port, b.Port, dsn)
	require.Equal(t, a.Database, b.Database, dsn)
	require.Equal(t, a.User, b.User, dsn)
	require.Equal(t, a.RuntimeParams, b.RuntimeParams, dsn)
	require.Equal(t, len(a.Fallbacks), len(b.Fallbacks), dsn)
	if !envPassword.MatchString(b.Password) {
		require.Empty(t, b.Password, "%q stripped to %q", dsn, stripped)
	}
	if len(a.Password) >= 4 && !strings.Contains(a.Password, "${") {
		require.NotContains(t, stripped, a.Password, dsn)
	}
}

func FuzzStripPassword(f *testing.F) {
	noAmbientPassword(f)
	for _, c := range stripCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		stripped := StripPassword(dsn)
		if stripped == Unparsable {
			_, err := pgconn.ParseConfig(dsn)
			require.Error(t, err, "%q parses, but StripPassword calls it unparsable", dsn)
			return
		}
		sameButPassword(t, dsn, stripped)
	})
}
