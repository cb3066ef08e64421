package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/app/localcluster"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// walkMarker precedes each block of the README that TestREADMEWalk runs,
// in the README's order: a ```sh block (every line not a comment is a
// command) or a ```console block (every line starting with "$ ").
const walkMarker = "<!-- walk -->"

// readmeServeAddr is the address the README's serve commands use; the
// walk replaces it with a free port, since other tests may hold 8080.
const readmeServeAddr = "127.0.0.1:8080"

// walkCommands returns the commands of the README's walk blocks, in order.
func walkCommands(readme string) ([]string, error) {
	lines := strings.Split(readme, "\n")
	var cmds []string
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != walkMarker {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || (lines[j] != "```sh" && lines[j] != "```console") {
			return nil, fmt.Errorf("README line %d: %s is not followed by a ```sh or ```console block", i+1, walkMarker)
		}
		console := lines[j] == "```console"
		for j++; j < len(lines) && lines[j] != "```"; j++ {
			l := strings.TrimSpace(lines[j])
			switch {
			case console && strings.HasPrefix(l, "$ "):
				cmds = append(cmds, strings.TrimPrefix(l, "$ "))
			case !console && l != "" && !strings.HasPrefix(l, "#"):
				cmds = append(cmds, l)
			}
		}
		if j == len(lines) {
			return nil, fmt.Errorf("README line %d: the walk block never ends", i+1)
		}
		i = j
	}
	return cmds, nil
}

// withoutComment cuts a shell command's trailing comment: "a  # b" -> "a".
func withoutComment(cmd string) string {
	if i := strings.Index(cmd, " #"); i >= 0 {
		cmd = cmd[:i]
	}
	return strings.TrimSpace(cmd)
}

func TestWalkCommands(t *testing.T) {
	cmds, err := walkCommands("x\n<!-- walk -->\n\n```sh\n# a comment\nshardid a   # b\n\nshardid c\n```\n```sh\nnot me\n```\n" +
		"<!-- walk -->\n```console\n$ shardid d\noutput\n$ curl e\n```\n")
	require.NoError(t, err)
	require.Equal(t, []string{"shardid a   # b", "shardid c", "shardid d", "curl e"}, cmds)
	require.Equal(t, "shardid a", withoutComment(cmds[0]))
	_, err = walkCommands("<!-- walk -->\n```go\nx\n```\n")
	require.ErrorContains(t, err, "not followed by")
	_, err = walkCommands("<!-- walk -->\n```sh\nx\n")
	require.ErrorContains(t, err, "never ends")
}

// TestREADMEWalk follows the README's cluster, migration, rebalancing and
// service sections as a new user would: the commands of its walk blocks,
// in order, with the binary built from this tree, in an empty directory,
// from `shardid local up` to `shardid local down`. Each must exit 0; the
// outputs a user relies on are checked.
func TestREADMEWalk(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts four PostgreSQL servers")
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	cmds, err := walkCommands(string(readme))
	require.NoError(t, err)
	require.NotEmpty(t, cmds)
	require.True(t, strings.HasPrefix(cmds[0], "shardid local up"), "the walk starts with shardid local up: %q", cmds[0])
	require.True(t, strings.HasPrefix(cmds[len(cmds)-1], "shardid local down"), "the walk ends with shardid local down: %q", cmds[len(cmds)-1])

	// The README's example migration is the sample the walk copies.
	sample, err := os.ReadFile("../../examples/shard-migrations/001_create_likes.sql")
	require.NoError(t, err)
	require.Contains(t, string(readme), "```sql\n"+string(sample)+"```", "README's example migration and examples/shard-migrations/001_create_likes.sql differ")

	work := pgtest.ReachableTempDir(t)
	bin := filepath.Dir(buildShardid(t))
	home := filepath.Join(work, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, "shard-migrations"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "shard-migrations", "001_create_likes.sql"), sample, 0o644))
	t.Cleanup(func() {
		// A walk that failed half way leaves no server behind.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		localcluster.Down(ctx, localcluster.Options{Dir: filepath.Join(home, ".shardid"), Config: filepath.Join(home, "shardid.yaml")}, true)
	})

	addr := freeAddr(t)
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "SHARDID_CONFIG=") {
			env = append(env, kv)
		}
	}

	checks := readmeChecks(t, home)
	seen := map[string]int{}
	var serve *exec.Cmd
	stopServe := func() {
		if serve != nil {
			_ = syscall.Kill(-serve.Process.Pid, syscall.SIGTERM)
			_ = serve.Wait()
			serve = nil
		}
	}
	t.Cleanup(stopServe)
	for _, line := range cmds {
		cmd := strings.ReplaceAll(withoutComment(line), readmeServeAddr, addr)
		key := withoutComment(line)
		seen[key]++
		var output string
		switch {
		case strings.HasPrefix(cmd, "shardid serve"):
			serve = exec.Command("sh", "-c", strings.TrimSuffix(strings.TrimSpace(cmd), "&"))
			serve.Dir, serve.Env = home, env
			serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			logs, err := os.Create(filepath.Join(work, "serve.log"))
			require.NoError(t, err)
			serve.Stdout, serve.Stderr = logs, logs
			require.NoError(t, serve.Start())
			logs.Close()
			waitListening(t, addr, 3*time.Minute, logs.Name())
		case strings.HasPrefix(cmd, "curl "):
			// Each curl of the line, by Go's HTTP client.
			for _, c := range strings.Split(cmd, ";") {
				url := regexp.MustCompile(`'?(http://[^' ]+)'?`).FindStringSubmatch(c)
				require.NotNil(t, url, "no URL in %q", c)
				body := httpGet(t, url[1])
				output += body
			}
		default:
			if strings.HasPrefix(cmd, "shardid local down") {
				stopServe() // as the README says: stop serve first
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			c := exec.CommandContext(ctx, "sh", "-c", cmd)
			c.Dir, c.Env = home, env
			b, err := c.CombinedOutput()
			cancel()
			require.NoError(t, err, "README command %q failed:\n%s", line, b)
			output = string(b)
		}
		t.Logf("$ %s\n%s", cmd, output)
		if fns := checks[key]; len(fns) >= seen[key] && fns[seen[key]-1] != nil {
			fns[seen[key]-1](t, output)
		}
	}
	// Every check ran: a README that drops a command the checks rely on
	// fails here, rather than passing with less checked.
	for key, fns := range checks {
		require.Equal(t, len(fns), seen[key], "README command %q: run %d times, checks expect %d", key, seen[key], len(fns))
	}
	require.NoFileExists(t, filepath.Join(home, "shardid.yaml"), "local down --purge removes the file up wrote")
}

type walkCheck func(t *testing.T, out string)

// readmeChecks holds, per README command (without its comment), one check
// per time it runs (nil: exit 0 is enough); the serve endpoints are keyed
// by their curl line.
func readmeChecks(t *testing.T, home string) map[string][]walkCheck {
	statusJSON := func(t *testing.T, out string) {
		var st struct {
			Hosts  []any `json:"hosts"`
			Shards []any `json:"shards"`
			Moves  []any `json:"moves"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		require.Len(t, st.Hosts, 3)
		require.Len(t, st.Shards, 16)
		require.NotNil(t, st.Moves)
		require.Empty(t, st.Moves)
	}
	contains := func(want ...string) walkCheck {
		return func(t *testing.T, out string) {
			for _, w := range want {
				require.Contains(t, out, w)
			}
		}
	}
	matches := func(re string) walkCheck {
		return func(t *testing.T, out string) { require.Regexp(t, re, out) }
	}
	return map[string][]walkCheck{
		"shardid local up --shard-count 16": {contains("wrote "+filepath.Join(home, "shardid.yaml"), "shardid local down")},
		"shardid local status":              {matches(`(?m)^pg3\s+\d+\s+running`)},
		"shardid init":                      {contains("nothing to do"), contains("host pg4: drain true")},
		"shardid status": {
			matches(`(?m)^pg1\s+6\s+██████··········\s+0-5$`),
			func(t *testing.T, out string) {
				require.Regexp(t, `(?m)^pg4\s+[1-9]\d*\s`, out)
				require.Contains(t, out, "no moves in progress")
			},
		},
		"shardid status --json":                                                         {statusJSON},
		"shardid verify --deep":                                                         {contains("verify: ok")},
		"shardid migrate up --dir shard-migrations":                                     {contains("migrate up to version 1 (001_create_likes.sql): 16 shards", "migrated 16")},
		"shardid migrate status --dir shard-migrations":                                 {contains("every shard is at version 1")},
		"shardid migrate down --to-version 0 --dir shard-migrations --shards 5,7,10-12": {contains("migrate down to version 0: 5 shards", "migrated 5")},
		"shardid migrate up --dir shard-migrations --shards 5,7,10-12":                  {contains("5 shards", "migrated 5")},
		"shardid migrate render --shard 5 --dir shard-migrations":                       {contains("DEFAULT shard_0005.next_id()")},
		"shardid migrate render --shard 5 --dir shard-migrations --format golang-migrate --out shard5": {
			func(t *testing.T, _ string) {
				require.FileExists(t, filepath.Join(home, "shard5", "001_create_likes.up.sql"))
			},
		},
		"shardid local add-host": {contains("added host pg4")},
		"shardid rebalance plan": {matches(`(?m)^\d+\s+pg\d\s+pg4\s`)},
		"shardid verify":         {contains("verify: ok"), contains("verify: ok", "16 shards on 3 hosts")},
		"shardid rebalance apply --dir shard-migrations --workers 4": {
			matches(`(?m)^\d+\s+\d+\s+pg[123]\s+pg4\s+online\s+cleaned\s`),
			// The drain: every move from pg4, none to it.
			func(t *testing.T, out string) {
				require.Regexp(t, `(?m)^\d+\s+\d+\s+pg4\s+pg[123]\s+online\s+cleaned\s`, out)
				require.NotRegexp(t, `(?m)^\d+\s+\d+\s+\S+\s+pg4\s`, out)
			},
		},
		"shardid rebalance cleanup":       {contains("0 dropped", "kept shard_", "'shardid rebalance cleanup --all' drops them now")},
		"shardid rebalance cleanup --all": {matches(`[1-9]\d* dropped, 0 kept`), matches(`[1-9]\d* dropped, 0 kept`)},
		"shardid shard move 0 --to pg4 --mode offline --dir shard-migrations": {
			matches(`(?m)^\d+\s+0\s+pg1\s+pg4\s+offline\s+cleaned\s`),
		},
		"shardid shard where 0": {contains("shard 0: schema shard_0000 on pg4, active", "dsn: postgres://postgres@127.0.0.1:")},
		"shardid local remove-host pg4": {
			func(t *testing.T, out string) {
				require.Contains(t, out, "catalog: remove host pg4")
				require.Contains(t, out, "removed host pg4: out of the cluster file, server stopped")
				file, err := os.ReadFile(filepath.Join(home, "shardid.yaml"))
				require.NoError(t, err)
				require.NotContains(t, string(file), "pg4")
			},
		},
		"curl -s 'http://127.0.0.1:8080/v1/ids/order?count=3'": {func(t *testing.T, out string) {
			var res struct {
				Tag string   `json:"tag"`
				IDs []string `json:"ids"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &res), out)
			require.Equal(t, "order", res.Tag)
			require.Len(t, res.IDs, 3)
			for _, id := range res.IDs {
				require.Regexp(t, `^ORD-\d{8}-\d{10}$`, id)
			}
		}},
		"curl -s http://127.0.0.1:8080/healthz; curl -s http://127.0.0.1:8080/metrics": {contains("shardid_segment")},
		"shardid local down --purge": {contains("stopped 3 servers")},
	}
}

// waitListening waits until addr accepts connections.
func waitListening(t *testing.T, addr string, timeout time.Duration, logFile string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			logs, _ := os.ReadFile(logFile)
			t.Fatalf("shardid serve did not listen on %s within %s: %v\n%s", addr, timeout, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpGet fetches url and requires 200 OK.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Get(url)
	require.NoError(t, err, "GET %s", url)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
	return string(body)
}
