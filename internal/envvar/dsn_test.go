package envvar

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// A ${VAR}'s value reads back as written, whatever it holds, in every
// part of a DSN of either form (failed before: '@' in a password moved
// the rest of it into the host).
func TestExpandDSNValuesAreLiteral(t *testing.T) {
	for _, pw := range []string{"s3cret", "p@ss/w?rd#x", `a'b\c d`, "100%:x&y=z", "ünï"} {
		env := map[string]string{"PW": pw, "U": "ap p@", "DB": "my db/x?", "H": "db1.example", "APP": "a b&c"}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		for _, dsn := range []string{
			"postgres://${U}:${PW}@${H}:5433/${DB}?application_name=${APP}&sslmode=disable",
			"postgresql://${U}:${PW}@${H}:5433/${DB}?application_name=${APP}&password=${PW}&sslmode=disable",
			"user=${U} password=${PW} host=${H} port=5433 dbname=${DB} application_name=${APP} sslmode=disable",
			"user='${U}' password='${PW}' host=${H} port=5433 dbname='${DB}' application_name='x ${APP}' sslmode=disable",
		} {
			out, missing, err := ExpandDSN(dsn, lookup)
			require.NoError(t, err, dsn)
			require.Empty(t, missing)
			cfg, err := pgconn.ParseConfig(out)
			require.NoError(t, err, "%s -> %s", dsn, out)
			require.Equal(t, pw, cfg.Password, out)
			require.Equal(t, "ap p@", cfg.User, out)
			require.Equal(t, "db1.example", cfg.Host, out)
			require.EqualValues(t, 5433, cfg.Port, out)
			require.Equal(t, "my db/x?", cfg.Database, out)
			require.Contains(t, cfg.RuntimeParams["application_name"], "a b&c", out)
		}
	}
}

// A value that would move the host part is refused, naming the variable
// and not its value; one where the structure is (a whole DSN) is taken
// as written.
func TestExpandDSNStructure(t *testing.T) {
	env := map[string]string{"H": "evil@db2/x", "URL": "postgres://u:pw@db3:5432/app", "PW": "x"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	_, _, err := ExpandDSN("postgres://u:${PW}@${H}/app", lookup)
	require.ErrorIs(t, err, ErrDSNStructure)
	require.Contains(t, err.Error(), "${H}")
	require.NotContains(t, err.Error(), "evil")

	for _, dsn := range []string{"${URL}", "${URL}?sslmode=disable"} {
		out, _, err := ExpandDSN(dsn, lookup)
		require.NoError(t, err)
		cfg, err := pgconn.ParseConfig(out)
		require.NoError(t, err, out)
		require.Equal(t, "db3", cfg.Host)
		require.Equal(t, "pw", cfg.Password)
	}
	out, missing, err := ExpandDSN("postgres://u:${MISSING}@h/${NOPE}", lookup)
	require.NoError(t, err)
	require.Equal(t, "postgres://u:@h/", out)
	require.Equal(t, []string{"MISSING", "NOPE"}, missing)
	out, _, err = ExpandDSN("host=h password=pa$$w", lookup)
	require.NoError(t, err)
	require.Equal(t, "host=h password=pa$$w", out, "a bare $ stays")
}

func FuzzExpandDSN(f *testing.F) {
	f.Add("p@ss/w?rd#x")
	f.Add(`a'b\c d`)
	f.Fuzz(func(t *testing.T, pw string) {
		if pw == "" || containsNUL(pw) {
			return
		}
		lookup := func(string) (string, bool) { return pw, true }
		for _, dsn := range []string{"postgres://u:${PW}@h/db", "host=h password=${PW}", "host=h password='${PW}'"} {
			out, _, err := ExpandDSN(dsn, lookup)
			require.NoError(t, err)
			cfg, err := pgconn.ParseConfig(out)
			if err != nil {
				return // pgconn refuses some bytes (invalid UTF-8 in a URL)
			}
			require.Equal(t, pw, cfg.Password, out)
			require.Equal(t, "h", cfg.Host, out)
		}
	})
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}
