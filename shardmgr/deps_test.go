package shardmgr_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRouterPackageLinksNoIDService: an application that imports shardmgr
// for the router links neither the id services nor an HTTP server (serve's
// sections of the cluster file are read by internal/app/serveconfig).
func TestRouterPackageLinksNoIDService(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	for _, banned := range []string{"net/http", "github.com/shardid/shardid/idgen/segment", "github.com/shardid/shardid/idgen/snowflake"} {
		require.NotContains(t, deps, banned)
	}
}
