package rebalance

import (
	"context"

	"github.com/shardid/shardid/shardmgr/cluster"
)

// MoveDryRun is what MoveShard would do, as DryRunMove found it: the
// move's hosts and mode, the preflight's checks, and the phases it would
// pass with the point of no return marked. Nothing was changed.
type MoveDryRun struct {
	Shard int    `json:"shard"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Mode is the mode the move would run in (in auto mode the one the
	// preflight chose; ModeReason says why offline).
	Mode       MoveMode `json:"mode"`
	ModeReason string   `json:"mode_reason,omitempty"`
	// Resumes is the id of the journaled move that MoveShard would resume
	// (0: it would journal a new one).
	Resumes   int64   `json:"resumes,omitempty"`
	Preflight []Check `json:"preflight"`
	// Phases are the phases of Mode in order, those a resumed move has
	// passed marked Done.
	Phases []DryRunPhase `json:"phases"`
}

// DryRunPhase is one phase of a dry run.
type DryRunPhase struct {
	Phase Phase `json:"phase"`
	// Done: the resumed move has passed it already.
	Done bool `json:"done,omitempty"`
	// Fenced: the source refuses writes while the move is in it.
	Fenced bool `json:"fenced"`
	// PointOfNoReturn: from this phase on the move can only be finished,
	// never aborted (AbortMove refuses it).
	PointOfNoReturn bool `json:"point_of_no_return,omitempty"`
}

// DryRunMove runs MoveShard's checks and preflight for a move of shard
// to host to, and reports the phases the move would pass and where its
// point of no return is, as Vitess's SwitchTraffic --dry_run does for its
// switch: nothing is journaled, registered, fenced or copied. A failed
// check is the same *PreflightError MoveShard would return.
func DryRunMove(ctx context.Context, c *cluster.Cluster, shard int, to string, opts MoveOptions) (*MoveDryRun, error) {
	p, err := prepareMove(ctx, c, shard, to, opts)
	if err != nil {
		return nil, err
	}
	d := &MoveDryRun{Shard: shard, To: to, Mode: p.mo.opts.Mode, Preflight: p.plan.Preflight}
	if d.Preflight == nil {
		d.Preflight = []Check{}
	}
	var done Phase
	if p.rec != nil {
		d.From, d.Mode, d.Resumes, done = p.rec.From, p.rec.Mode, p.rec.ID, p.rec.Phase
	} else {
		pm := p.plan.Moves[0]
		d.From, d.ModeReason = pm.From, pm.ModeReason
		if pm.Mode != "" {
			d.Mode = pm.Mode
		}
	}
	passed := done != ""
	for _, s := range phases[d.Mode] {
		d.Phases = append(d.Phases, DryRunPhase{Phase: s.phase, Done: passed, Fenced: s.fencedAfter, PointOfNoReturn: s.phase == PointOfNoReturn})
		if s.phase == done {
			passed = false
		}
	}
	return d, nil
}
