package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/install"
)

// A host added while the console runs (the cluster file and init, as
// `host add` does) shows reachable on the map and in /api/hosts without
// a restart: the console rereads the cluster file when the catalog's
// hosts change. A file that does not read keeps the last good one, and
// the map says so; once it reads again the new host shows. Failed
// before: the added host stayed UNREACHABLE ("not in the cluster file")
// until the console was restarted.
func TestConsoleRereadsClusterFile(t *testing.T) {
	tc := newTestCluster(t, 2, 2, 4, 1)
	base, _ := tc.serve(t, Options{})
	row := regexp.MustCompile(`(?s)<tr id="host-(pg\d)".*?</tr>`)
	mapRows := func() map[string]string {
		code, _, body := get(t, base+"/part/map")
		require.Equal(t, http.StatusOK, code, body)
		out := map[string]string{}
		for _, m := range row.FindAllStringSubmatch(body, -1) {
			out[m[1]] = m[0]
		}
		out["problem"] = ""
		if i := strings.Index(body, `id="file-problem"`); i >= 0 {
			out["problem"] = body[i:min(len(body), i+600)]
		}
		return out
	}
	reachable := func(rows map[string]string, name string) bool {
		r, ok := rows[name]
		return ok && strings.Contains(r, `badge ok">reachable`) && !strings.Contains(r, "UNREACHABLE")
	}
	apiHost := func(name string) hosts.Host {
		code, _, body := get(t, base+"/api/hosts")
		require.Equal(t, http.StatusOK, code, body)
		var list []hosts.Host
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		for _, h := range list {
			if h.Name == name {
				return h
			}
		}
		t.Fatalf("%s not in /api/hosts: %s", name, body)
		return hosts.Host{}
	}
	rows := mapRows()
	require.True(t, reachable(rows, "pg1"), rows["pg1"])

	// pg3 joins: the file and the catalog (init through a handle of its
	// own, as `shardid host add` is another process).
	good := tc.appendHost(t, "pg3", 1)
	require.Eventually(t, func() bool {
		rows = mapRows()
		return reachable(rows, "pg3")
	}, time.Minute, 200*time.Millisecond, "pg3 not shown reachable: %v", rows["pg3"])
	require.Empty(t, rows["problem"])
	h := apiHost("pg3")
	require.Empty(t, h.Error)
	require.NotNil(t, h.Server, "pg3's server answered")

	// pg4 joins the catalog through a copy of the file, while the
	// console's file does not parse: the console keeps the last good
	// file, says so, and still serves pg1 to pg3.
	spare := filepath.Join(t.TempDir(), "spare.yaml")
	require.NoError(t, os.WriteFile(spare, []byte(good), 0o600))
	withPG4 := appendHostTo(t, spare, "pg4", tc.newDB(t, pgtest.Servers(t, 2)[0]))
	require.NoError(t, os.WriteFile(tc.path, []byte("cluster: console\nshards: [\n"), 0o600))
	require.Eventually(t, func() bool {
		rows = mapRows()
		return rows["problem"] != ""
	}, time.Minute, 200*time.Millisecond, "no word of the broken file")
	require.Contains(t, rows["problem"], "The cluster file "+tc.path+" could not be reread")
	require.Contains(t, rows["problem"], "The console keeps the hosts it read at")
	require.True(t, reachable(rows, "pg3"), rows["pg3"])
	require.False(t, reachable(rows, "pg4"), "pg4 is in no file the console read: %s", rows["pg4"])

	// The file is mended: pg4 shows, and the warning goes.
	require.NoError(t, os.WriteFile(tc.path, []byte(withPG4), 0o600))
	require.Eventually(t, func() bool {
		rows = mapRows()
		return reachable(rows, "pg4") && rows["problem"] == ""
	}, time.Minute, 200*time.Millisecond, "pg4 not shown reachable after the file was mended: %v %v", rows["pg4"], rows["problem"])
}

// appendHost adds host name on server srv to the cluster file and runs
// init through a handle of its own (the console's is left alone); it
// returns the file's new text.
func (tc *testCluster) appendHost(t *testing.T, name string, srv int) string {
	t.Helper()
	return appendHostTo(t, tc.path, name, tc.newDB(t, pgtest.Servers(t, srv+1)[srv]))
}

// appendHostTo adds host name with dsn to the cluster file at path and
// runs init on it through a handle of its own; it returns the file's
// new text.
func appendHostTo(t *testing.T, path, name, dsn string) string {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "  - name: %s\n    dsn: %s\n", name, dsn)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)
	c, err := cluster.Open(context.Background(), cfg)
	require.NoError(t, err)
	defer c.Close()
	_, err = install.Init(context.Background(), c, install.InitOptions{})
	require.NoError(t, err)
	text, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(text)
}
