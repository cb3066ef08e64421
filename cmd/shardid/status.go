package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
)

func newStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--config FILE] [--json]",
		Short: "Show the map of hosts and shards, each shard's state, and the moves in progress",
		Long: `Reads the map and the move journal from the catalog and prints, per host, its
number of shards, a strip of the whole shard space with its own shards marked
and its shards as ranges (with their state when not active), UNREACHABLE
after a host that did not answer a query within 5 s (and why, below the
table; "unreachable" in the JSON); then each run of
consecutive shards with its host and state; then the moves in progress. The
text has no escape codes, on a terminal or not.

--json prints
{"generation":N,"hosts":[{"name":"pg1","shards":[0,1,...],"unreachable":"why, when it is"}],
 "shards":[{"id":0,"schema":"shard_0000","host":"pg1","state":"active"}],
 "moves":[{"id":N,"shard":5,"from":"pg3","to":"pg4","mode":"online","phase":"copy",
           "bytes":N,"rows":N,"started":"RFC 3339","error":"..."}]}
where "moves" lists the moves in progress ('shardid rebalance status --all' has
every move).`,
		Args: cobra.NoArgs,
	}
	configPath := addClusterFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the map as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := openCluster(cmd, *configPath)
		if err != nil {
			return err
		}
		defer c.Close()
		cfg := c.Config()
		st, err := install.ClusterStatus(cmd.Context(), c)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), st)
		}
		printStatus(cmd.OutOrStdout(), cfg.Cluster, st, time.Now())
		return nil
	}
	return cmd
}

// mapCells is the most cells the strip of the shard space has: a cell
// stands for several shards when the cluster has more.
const mapCells = 48

// Cells of the strip: a host's own shards, those moving or read-only, a
// shard coming to it in a move in progress, and shards elsewhere.
const (
	cellActive   = '█'
	cellOther    = '▒'
	cellIncoming = '░'
	cellNone     = '·'
)

func printStatus(w io.Writer, cluster string, st *install.Status, now time.Time) {
	fmt.Fprintf(w, "cluster %s, generation %d, %d shards on %d hosts", cluster, st.Generation, len(st.Shards), len(st.Hosts))
	if n := len(st.Moves); n > 0 {
		fmt.Fprintf(w, ", %d %s in progress", n, plural(n, "move", "moves"))
	}
	var unreachable []install.HostStatus
	for _, h := range st.Hosts {
		if h.Unreachable != "" {
			unreachable = append(unreachable, h)
		}
	}
	if n := len(unreachable); n > 0 {
		fmt.Fprintf(w, ", %d %s UNREACHABLE", n, plural(n, "host", "hosts"))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)

	incoming := map[string]map[int]bool{}
	for _, mv := range st.Moves {
		if incoming[mv.To] == nil {
			incoming[mv.To] = map[int]bool{}
		}
		incoming[mv.To][mv.Shard] = true
	}
	n := len(st.Shards)
	cells := min(n, mapCells)
	per := (n + cells - 1) / max(cells, 1)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "MAP"
	if per > 1 {
		head = fmt.Sprintf("MAP (a cell is %d shards)", per)
	}
	fmt.Fprintf(tw, "HOST\tSHARDS\t%s\tRANGES\n", head)
	for _, h := range st.Hosts {
		strip := make([]rune, (n+per-1)/max(per, 1))
		for i := range strip {
			strip[i] = cellNone
		}
		for id := range incoming[h.Name] {
			if id < n {
				strip[id/per] = cellIncoming
			}
		}
		for _, id := range h.Shards {
			c := &strip[id/per]
			if st.Shards[id].State != shardmgr.StateActive {
				*c = cellOther
			} else if *c != cellOther {
				*c = cellActive
			}
		}
		mark := ""
		if h.Unreachable != "" {
			mark = "  UNREACHABLE"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s%s\n", h.Name, len(h.Shards), string(strip), hostRanges(st, h.Shards), mark)
	}
	tw.Flush()
	for _, h := range unreachable {
		fmt.Fprintf(w, "%s is unreachable: %s\n", h.Name, oneLine(h.Unreachable))
	}
	fmt.Fprintf(w, "(%c active, %c moving or read-only, %c coming in a move in progress, %c elsewhere)\n\n", cellActive, cellOther, cellIncoming, cellNone)

	// Each shard's host and state, as runs of consecutive shards.
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARDS\tHOST\tSTATE")
	for i := 0; i < len(st.Shards); {
		j := i
		for j+1 < len(st.Shards) && st.Shards[j+1].Host == st.Shards[i].Host && st.Shards[j+1].State == st.Shards[i].State {
			j++
		}
		ids := fmt.Sprint(st.Shards[i].ID)
		if j > i {
			ids = fmt.Sprintf("%d-%d", st.Shards[i].ID, st.Shards[j].ID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ids, st.Shards[i].Host, st.Shards[i].State)
		i = j + 1
	}
	tw.Flush()

	if len(st.Moves) == 0 {
		fmt.Fprintln(w, "\nno moves in progress")
		return
	}
	fmt.Fprintf(w, "\nmoves in progress (%d):\n", len(st.Moves))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MOVE\tSHARD\tFROM\tTO\tMODE\tPHASE\tROWS\tSTARTED")
	for _, mv := range st.Moves {
		ago := now.Sub(mv.Started).Round(time.Second)
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s (%s ago)\n", mv.ID, mv.Shard, mv.From, mv.To, mv.Mode, mv.Phase, mv.Rows,
			mv.Started.UTC().Format(time.RFC3339), ago)
	}
	tw.Flush()
	stopped := false
	for _, mv := range st.Moves {
		if mv.Error != "" {
			fmt.Fprintf(w, "move %d (shard %d) stopped: %s\n", mv.ID, mv.Shard, oneLine(mv.Error))
			stopped = true
		}
	}
	if stopped {
		fmt.Fprintln(w, "'shardid rebalance apply' resumes a stopped move, 'shardid rebalance abort --shard N' rolls it back")
	}
}

// hostRanges writes a host's shards as runs, each non-active run with its
// state: 0-20,21 (moving).
func hostRanges(st *install.Status, ids []int) string {
	if len(ids) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		state := st.Shards[ids[i]].State
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 && st.Shards[ids[j+1]].State == state {
			j++
		}
		p := fmt.Sprint(ids[i])
		if j > i {
			p = fmt.Sprintf("%d-%d", ids[i], ids[j])
		}
		if state != shardmgr.StateActive {
			p += " (" + string(state) + ")"
		}
		parts = append(parts, p)
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
