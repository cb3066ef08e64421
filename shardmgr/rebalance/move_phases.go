package rebalance

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
)

// move is one move at work: its journal record and the pools of both of
// its hosts, opened once (mover.open) for every step.
type move struct {
	*MoveRecord
	src, dst *pgxpool.Pool

	// prescan holds an online move's scans of both hosts before its fence.
	prescan *prescan
}

// step is one row of a mode's phase table: the phase it leads to, the
// work that gets there, whether the source refuses writes once the move
// is in that phase (fencedAfter), and the phase a failed move is set back
// to when its source is given back (backTo, for the fenced phases).
type step struct {
	phase       Phase
	run         func(mo *mover, ctx context.Context, mv *move) error
	fencedAfter bool
	backTo      Phase
}

// phases is the one description of a move: the phases each mode passes, in
// order, read by mover.run (the loop), steps, sourceFenced and
// unfenceSource. The first row is where a journaled move starts. (It is
// filled in init: the steps' work reports progress, which reads it.)
var phases map[MoveMode][]step

func init() { phases = phaseTable() }

func phaseTable() map[MoveMode][]step {
	return map[MoveMode][]step{
		// Online: copy and follow changes while the source serves; the fence
		// goes up only for the cut-over.
		MoveOnline: {
			{phase: PhasePlanned},
			{phase: PhaseSchema, run: (*mover).buildTarget},
			{phase: PhaseCopy, run: (*mover).startReplication},
			{phase: PhaseCatchup, run: (*mover).catchUp},
			{phase: PhaseFenced, run: (*mover).fence, fencedAfter: true, backTo: PhaseCatchup},
			{phase: PhaseVerified, run: (*mover).verifyCopy, fencedAfter: true, backTo: PhaseCatchup},
			// This is the point of no return: once the catalog names the
			// target, the move can only be finished, never aborted.
			{phase: PointOfNoReturn, run: (*mover).flip},
			{phase: PhaseCleaned, run: (*mover).cleanup},
		},
		// Offline: fence first, then copy with COPY.
		MoveOffline: {
			{phase: PhasePlanned},
			{phase: PhaseSchema, run: (*mover).buildTarget},
			{phase: PhaseFenced, run: (*mover).fence, fencedAfter: true, backTo: PhaseSchema},
			{phase: PhaseCopy, run: (*mover).copyOffline, fencedAfter: true, backTo: PhaseSchema},
			{phase: PhaseVerified, run: (*mover).verifyCopy, fencedAfter: true, backTo: PhaseSchema},
			{phase: PointOfNoReturn, run: (*mover).flip}, // the point of no return
			{phase: PhaseCleaned, run: (*mover).cleanup},
		},
	}
}

// steps returns the phases a move of mode passes, in order.
func steps(mode MoveMode) []Phase {
	var out []Phase
	for _, s := range phases[mode] {
		out = append(out, s.phase)
	}
	return out
}

// stepOf is the row of phase p in mode's table.
func stepOf(mode MoveMode, p Phase) (step, bool) {
	i := slices.IndexFunc(phases[mode], func(s step) bool { return s.phase == p })
	if i < 0 {
		return step{}, false
	}
	return phases[mode][i], true
}

// nextStep is the row after phase p in mode's table.
func nextStep(mode MoveMode, p Phase) (step, bool) {
	table := phases[mode]
	i := slices.IndexFunc(table, func(s step) bool { return s.phase == p })
	if i < 0 || i+1 >= len(table) {
		return step{}, false
	}
	return table[i+1], true
}

// sourceFenced reports whether the source refuses writes while a move of
// mode is in phase p.
func sourceFenced(mode MoveMode, p Phase) bool {
	s, ok := stepOf(mode, p)
	return ok && s.fencedAfter
}

// open opens the pools of mv's hosts, once.
func (mo *mover) open(ctx context.Context, mv *move) error {
	if mv.src != nil && mv.dst != nil {
		return nil
	}
	src, err := mo.pool(ctx, mv.From)
	if err != nil {
		return err
	}
	dst, err := mo.pool(ctx, mv.To)
	if err != nil {
		return err
	}
	mv.src, mv.dst = src, dst
	return nil
}

// backTo is the phase a failed move of mode in phase p is set back to when
// its source is given back.
func backTo(mode MoveMode, p Phase) (Phase, error) {
	s, ok := stepOf(mode, p)
	if !ok || s.backTo == "" {
		return "", fmt.Errorf("a %s move in phase %s has no fence to lift", mode, p)
	}
	return s.backTo, nil
}
