package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
)

// testStatus builds a status of n shards from host names per shard.
func testStatus(hosts []string, placement func(id int) (string, shardmgr.State), n int) *install.Status {
	st := &install.Status{Generation: 7, Moves: []install.MoveStatus{}}
	for _, h := range hosts {
		st.Hosts = append(st.Hosts, install.HostStatus{Name: h, Shards: []int{}})
	}
	for id := range n {
		h, state := placement(id)
		st.Shards = append(st.Shards, install.ShardStatus{ID: id, Schema: "s", Host: h, State: state})
		for i := range st.Hosts {
			if st.Hosts[i].Name == h {
				st.Hosts[i].Shards = append(st.Hosts[i].Shards, id)
			}
		}
	}
	return st
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	// 16 shards: pg1 0-5, pg2 6-10 (10 moving), pg3 11-15 (13 read-only),
	// pg4 none yet; shard 10 on its way to pg4.
	st := testStatus([]string{"pg1", "pg2", "pg3", "pg4"}, func(id int) (string, shardmgr.State) {
		switch {
		case id <= 5:
			return "pg1", shardmgr.StateActive
		case id == 10:
			return "pg2", shardmgr.StateMoving
		case id <= 10:
			return "pg2", shardmgr.StateActive
		case id == 13:
			return "pg3", shardmgr.StateReadOnly
		}
		return "pg3", shardmgr.StateActive
	}, 16)
	st.Moves = []install.MoveStatus{
		{ID: 3, Shard: 10, From: "pg2", To: "pg4", Mode: "online", Phase: "catchup", Rows: 1200, Started: now.Add(-90 * time.Second)},
		{ID: 4, Shard: 15, From: "pg3", To: "pg4", Mode: "offline", Phase: "planned", Started: now.Add(-time.Hour), Error: "host pg4:\nconnection refused"},
	}
	var b strings.Builder
	printStatus(&b, "demo", st, now)
	out := b.String()
	require.Equal(t, `cluster demo, generation 7, 16 shards on 4 hosts, 2 moves in progress

HOST  SHARDS  MAP               RANGES
pg1   6       ██████··········  0-5
pg2   5       ······████▒·····  6-9,10 (moving)
pg3   5       ···········██▒██  11-12,13 (read-only),14-15
pg4   0       ··········░····░  -
(█ active, ▒ moving or read-only, ░ coming in a move in progress, · elsewhere)

SHARDS  HOST  STATE
0-5     pg1   active
6-9     pg2   active
10      pg2   moving
11-12   pg3   active
13      pg3   read-only
14-15   pg3   active

moves in progress (2):
MOVE  SHARD  FROM  TO   MODE     PHASE    ROWS  STARTED
3     10     pg2   pg4  online   catchup  1200  2026-11-29T11:58:30Z (1m30s ago)
4     15     pg3   pg4  offline  planned  0     2026-11-29T11:00:00Z (1h0m0s ago)
move 4 (shard 15) stopped: host pg4: | connection refused
'shardid rebalance apply' resumes a stopped move, 'shardid rebalance abort --shard N' rolls it back
`, out)
	require.NotContains(t, out, "\x1b", "no escape codes")

	// Many shards: a cell stands for several; no moves.
	st = testStatus([]string{"pg1", "pg2"}, func(id int) (string, shardmgr.State) {
		if id < 600 {
			return "pg1", shardmgr.StateActive
		}
		return "pg2", shardmgr.StateActive
	}, 1024)
	b.Reset()
	printStatus(&b, "big", st, now)
	out = b.String()
	require.Contains(t, out, "cluster big, generation 7, 1024 shards on 2 hosts\n")
	require.Contains(t, out, "MAP (a cell is 22 shards)")
	require.Regexp(t, `(?m)^pg1\s+600\s+█{28}·{19}\s+0-599$`, out)
	require.Regexp(t, `(?m)^pg2\s+424\s+·{27}█{20}\s+600-1023$`, out)
	require.True(t, strings.HasSuffix(out, "\nno moves in progress\n"), out)
}
