package pg

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestServersOfMultiHostDSN: a DSN naming a primary and its standby
// (both forms pgx and libpq accept) names both servers, whatever their
// order, so that the connection budget and the duplicate check see one
// set of servers, and a password in it is stripped as in a single-host one.
func TestServersOfMultiHostDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, servers, key string }{
		{"host=10.0.0.1 port=5432 dbname=app", "10.0.0.1:5432", "10.0.0.1:5432/app"},
		{"host=10.0.0.1,10.0.0.2 port=5432,5433 dbname=app target_session_attrs=read-write", "10.0.0.1:5432,10.0.0.2:5433", "10.0.0.1:5432,10.0.0.2:5433/app"},
		{"host=10.0.0.2,10.0.0.1 port=5433,5432 dbname=app", "10.0.0.1:5432,10.0.0.2:5433", "10.0.0.1:5432,10.0.0.2:5433/app"},
		{"postgres://app:pw@10.0.0.2:5433,10.0.0.1:5432/app?target_session_attrs=read-write", "10.0.0.1:5432,10.0.0.2:5433", "10.0.0.1:5432,10.0.0.2:5433/app"},
		// sslmode=prefer (the default) tries each server twice: listed once.
		{"postgres://10.0.0.1,10.0.0.2/app?sslmode=prefer", "10.0.0.1:5432,10.0.0.2:5432", "10.0.0.1:5432,10.0.0.2:5432/app"},
	} {
		pc, err := pgconn.ParseConfig(tc.dsn)
		require.NoError(t, err)
		require.Equal(t, tc.servers, Servers(pc), tc.dsn)
		key, err := DatabaseKey(tc.dsn)
		require.NoError(t, err)
		require.Equal(t, tc.key, key, tc.dsn)
	}
	require.Equal(t, "postgres://app@10.0.0.2:5433,10.0.0.1:5432/app?target_session_attrs=read-write",
		StripPassword("postgres://app:pw@10.0.0.2:5433,10.0.0.1:5432/app?target_session_attrs=read-write"))
	require.Equal(t, "host=a,b port=1,2 dbname=app", StripPassword("host=a,b port=1,2 password=pw dbname=app"))
}
