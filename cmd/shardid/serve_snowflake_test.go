package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/logbuf"
)

// buildShardid compiles this command into a temporary directory, for
// tests that need separate processes (to kill -9 one).
func buildShardid(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shardid")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// serveProc is one `shardid serve` process.
type serveProc struct {
	cmd  *exec.Cmd
	addr string
	log  *logbuf.Buffer
}

func startServe(t *testing.T, bin, config string) *serveProc {
	t.Helper()
	p := &serveProc{addr: freeAddr(t), log: new(logbuf.Buffer)}
	p.cmd = exec.Command(bin, "serve", "--config", config, "--listen", p.addr)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	// serve listens at once and says on /healthz when it can hand out ids.
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 60*time.Second, 20*time.Millisecond, "serve did not come up: %s", p.log)
	return p
}

// fetch asks p for count ids and returns them (nil once p is gone).
func (p *serveProc) fetch(count int) ([]int64, error) {
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/snowflake?count=%d", p.addr, count))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		IDs   []string `json:"ids"`
		Error string   `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%d: %s", resp.StatusCode, body.Error)
	}
	ids := make([]int64, len(body.IDs))
	for i, s := range body.IDs {
		if ids[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Two serve processes on one lease database get different worker ids; one
// killed with SIGKILL and started again at once, and again after its lease
// expired, never repeats an id of the whole run.
func TestServeSnowflakeKillAndRestart(t *testing.T) {
	bin := buildShardid(t)
	leases := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	config := filepath.Join(t.TempDir(), "shardid.yaml")
	t.Setenv("LEASES_DSN", leases)
	require.NoError(t, os.WriteFile(config, []byte(`snowflake:
  leases: ${LEASES_DSN}
  datacenter: 1
  epoch_ms: 1288834974657
  ttl: 10s
`), 0o600))
	// The lease lives 10 s: long enough that a process started "at once"
	// after a kill finds the dead one's lease alive even when starting it
	// takes seconds (at a load of 60 it took more than 2 s).
	const ttl = 10 * time.Second

	var mu sync.Mutex
	all := map[int64]string{}
	workers := map[string]int64{}
	record := func(name string, ids []int64) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			p, err := snowflake.Twitter.Decompose(id)
			require.NoError(t, err)
			require.Equal(t, int64(1), p.Datacenter)
			if w, ok := workers[name]; ok {
				require.Equal(t, w, p.Worker, name)
			}
			workers[name] = p.Worker
			if prev, dup := all[id]; dup {
				t.Fatalf("id %d from %s repeats one from %s", id, name, prev)
			}
			all[id] = name
		}
	}
	worker := func(name string) int64 {
		mu.Lock()
		defer mu.Unlock()
		return workers[name]
	}
	// b serves throughout, from its own goroutine, while a dies and comes
	// back.
	a := startServe(t, bin, config)
	b := startServe(t, bin, config)
	stopB := make(chan struct{})
	bDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stopB:
				bDone <- nil
				return
			default:
			}
			ids, err := b.fetch(1000)
			if err != nil {
				bDone <- err
				return
			}
			record("b", ids)
		}
	}()
	for range 20 {
		ids, err := a.fetch(1000)
		require.NoError(t, err)
		record("a1", ids)
	}
	require.NotEqual(t, worker("a1"), worker("b"), "two processes, two workers")

	// kill -9 and start again at once: a's lease still lives, so the new
	// process takes another worker.
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	a.cmd.Wait()
	a2 := startServe(t, bin, config)
	for range 20 {
		ids, err := a2.fetch(1000)
		require.NoError(t, err, a2.log.String())
		record("a2", ids)
	}
	require.NotEqual(t, worker("a1"), worker("a2"))
	require.NotEqual(t, worker("b"), worker("a2"))

	// Kill a2 too, wait for a1's lease to expire: the next process takes
	// a1's worker back and starts after a1's last possible time.
	require.NoError(t, a2.cmd.Process.Signal(syscall.SIGKILL))
	a2.cmd.Wait()
	time.Sleep(ttl + 500*time.Millisecond)
	a3 := startServe(t, bin, config)
	for range 20 {
		ids, err := a3.fetch(1000)
		require.NoError(t, err, a3.log.String())
		record("a3", ids)
	}
	require.Contains(t, []int64{worker("a1"), worker("a2")}, worker("a3"), "an expired worker is reused")

	close(stopB)
	require.NoError(t, <-bDone, b.log.String())
	// A graceful stop releases the lease.
	require.NoError(t, a3.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, a3.cmd.Wait(), a3.log.String())
	require.Contains(t, a3.log.String(), "stopped")
	t.Logf("%d ids, workers %v, no repeats", len(all), workers)
}

func TestServeSnowflakeBadSection(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ text, msg string }{
		"no leases":   {"snowflake:\n  datacenter: 1\n", "snowflake.leases"},
		"datacenter":  {"snowflake:\n  leases: postgres://h/x\n  datacenter: 32\n", "snowflake.datacenter 32"},
		"unknown key": {"snowflake:\n  leases: postgres://h/x\n  worker: 3\n", "worker"},
	} {
		file := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(file, []byte(tc.text), 0o600))
		_, err := runShardid(t, "serve", "--config", file, "--listen", "127.0.0.1:0")
		require.ErrorContains(t, err, tc.msg, name)
		require.Equal(t, 1, exitCode(err), name)
	}
}

// Both sections in one file: segment ids and snowflake ids side by side.
func TestServeSegmentsAndSnowflake(t *testing.T) {
	srv := pgtest.Servers(t, 1)[0]
	serveDraws(t, pgtest.NewDB(t, srv), pgtest.NewDB(t, srv))
}

// serveDraws runs serve in this process with its segment source at seg
// and its lease database at leases (both migrated by serve itself) until
// it hands out snowflake ids (datacenter 7) and segment ids of tag order,
// then stops it.
func serveDraws(t *testing.T, seg, leases string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(file, []byte("segments:\n  sources:\n    - '"+seg+"'\n  tags:\n    order: {}\nsnowflake:\n  leases: '"+leases+"'\n  datacenter: 7\n"), 0o600))
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	t.Cleanup(func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) })
	p := &serveProc{addr: freeAddr(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetArgs([]string{"serve", "--config", file, "--listen", p.addr})
		done <- root.ExecuteContext(ctx)
	}()
	var ids []int64
	var stopped error
	var last error
	// A bound on a hang: serve migrates both databases before it is
	// ready, which takes seconds on a loaded machine.
	require.Eventually(t, func() bool {
		select {
		case stopped = <-done:
			return true
		default:
		}
		ids, last = p.fetch(3)
		return last == nil
	}, 2*time.Minute, 20*time.Millisecond, "serve hands out no snowflake id: %v", last)
	require.NoError(t, stopped, "serve stopped")
	require.Len(t, ids, 3)
	parts, err := snowflake.Twitter.Decompose(ids[0])
	require.NoError(t, err)
	require.Equal(t, int64(7), parts.Datacenter)
	resp, err := http.Get("http://" + p.addr + "/v1/ids/order?count=2")
	require.NoError(t, err)
	var body struct {
		IDs []string `json:"ids"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Len(t, body.IDs, 2)
	require.NotEqual(t, body.IDs[0], body.IDs[1])
	cancel()
	require.NoError(t, <-done)
}
