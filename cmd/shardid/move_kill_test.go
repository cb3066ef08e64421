package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
)

// TestShardMoveKilledInCutover runs shardid shard move as a process of
// its own and kills it with kill -9 at each point of the cut-over past
// the catalog's flip (the catalog names the target, which is not open
// yet; the target just opened), while writers insert straight into the
// shard's copy on both hosts. Abort refuses the flipped move; running the
// move again finishes it; every id a host acknowledged is on the shard's
// host. (The binary is built with -tags shardid_crashtest, whose mover
// stops for good at the point SHARDID_CRASHTEST_HANG_AT names.)
func TestShardMoveKilledInCutover(t *testing.T) {
	path := clusterPath(t, 4)
	dir := initAndFill(t, path, 4, 50)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "  - name: pg4\n    dsn: %s\n", pgtest.NewDB(t, pgtest.Servers(t, 4)[3]))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	initOut, code := runClusterCmd(t, "init", "--config", path) // applies pg4 to the catalog
	require.Equal(t, 0, code, initOut)
	cfg, err := shardmgr.LoadConfig(path)
	require.NoError(t, err)

	bin := filepath.Join(t.TempDir(), "shardid")
	out, err := exec.Command("go", "build", "-tags", "shardid_crashtest", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	pools := map[string]*pgxpool.Pool{}
	for _, h := range cfg.Hosts {
		p, err := pgxpool.New(context.Background(), h.DSN)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		pools[h.Name] = p
	}
	for shard, point := range map[int]string{1: "flip-committed", 2: "target-opened"} {
		t.Run(point, func(t *testing.T) {
			schema := fmt.Sprintf("shard_%04d", shard)
			var mu sync.Mutex
			var acked []int64
			refused := 0
			c, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, p := range pools {
				wg.Go(func() {
					for c.Err() == nil {
						var id int64
						err := p.QueryRow(c, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES (1, 1) RETURNING id`, pgx.Identifier{schema, "likes"}.Sanitize())).Scan(&id)
						mu.Lock()
						if err == nil {
							acked = append(acked, id)
						} else {
							refused++
						}
						mu.Unlock()
						time.Sleep(2 * time.Millisecond)
					}
				})
			}
			t.Cleanup(func() { stop(); wg.Wait() })

			cmd := exec.Command(bin, "shard", "move", fmt.Sprint(shard), "--to", "pg4", "--config", path, "--dir", dir)
			cmd.Env = append(os.Environ(), "SHARDID_CRASHTEST_HANG_AT="+point)
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			reached := make(chan bool, 1)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "hanging at "+point) {
						reached <- true
					}
				}
				close(reached)
			}()
			select {
			case ok := <-reached:
				require.True(t, ok, "the move ended before %s", point)
			case <-time.After(5 * time.Minute):
				t.Fatalf("the move did not reach %s within 5 minutes", point)
			}
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
			_ = cmd.Wait()
			time.Sleep(300 * time.Millisecond) // the writers carry on in the state it left

			out, code := runClusterCmd(t, "rebalance", "abort", "--shard", fmt.Sprint(shard), "--config", path)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, "flipped")
			out, code = runClusterCmd(t, "shard", "move", fmt.Sprint(shard), "--to", "pg4", "--config", path, "--dir", dir)
			require.Equal(t, 0, code, out)
			time.Sleep(100 * time.Millisecond)
			stop()
			wg.Wait()

			rows, err := pools["pg4"].Query(context.Background(), fmt.Sprintf(`SELECT id FROM %s ORDER BY id`, pgx.Identifier{schema, "likes"}.Sanitize()))
			require.NoError(t, err)
			got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			require.NoError(t, err)
			var lost []int64
			for _, id := range acked {
				if _, ok := slices.BinarySearch(got, id); !ok {
					lost = append(lost, id)
				}
			}
			t.Logf("%s: %d writes acknowledged, %d refused", point, len(acked), refused)
			require.Positive(t, len(acked))
			require.Empty(t, lost, "ids acknowledged by a host and not on the shard's host")
		})
	}
}
