package envvar

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"PGPASS": "s3cret", "PGHOST": "db1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	out, missing := Expand("postgres://app:${PGPASS}@${PGHOST}:5432/seg", lookup)
	require.Equal(t, "postgres://app:s3cret@db1:5432/seg", out)
	require.Empty(t, missing)
	out, missing = Expand("postgres://app:pa$$w@h/seg", lookup)
	require.Equal(t, "postgres://app:pa$$w@h/seg", out, "a bare $ stays")
	require.Empty(t, missing)
	out, missing = Expand("postgres://u:${MISSING}@h/${PGHOST}${OTHER}", lookup)
	require.Equal(t, "postgres://u:@h/db1", out)
	require.Equal(t, []string{"MISSING", "OTHER"}, missing)
	_, missing = Expand("${PGPASS}", nil)
	require.Equal(t, []string{"PGPASS"}, missing, "nil lookup: nothing is set")
}
