package install

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDSNWithoutPassword(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://app:s3cret@db1:5432/app?sslmode=disable", "postgres://app@db1:5432/app?sslmode=disable"},
		{"postgres://app:${PGPASS}@db1/app", "postgres://app@db1/app"},
		{"postgresql://app@db1/app?password=s3cret&sslmode=require", "postgresql://app@db1/app?sslmode=require"},
		{"postgres://db1/app", "postgres://db1/app"},
		{"host=db1 user=app password=s3cret dbname=app", "host=db1 user=app dbname=app"},
		{"host=db1 password='s3 cr\\'et' dbname=app", "host=db1 dbname=app"},
		{"password = s3cret host=db1", "host=db1"},
	} {
		got := DSNWithoutPassword(tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.NotContains(t, got, "s3")
	}
}
