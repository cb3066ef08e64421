package console

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/shardid/shardid/shardmgr/rebalance"
)

// finishedShown is how many finished moves the moves page lists.
const finishedShown = 20

// movesView is the moves page's data.
type movesView struct {
	Open     []moveRow
	Finished []moveRow
	Retained []rebalance.KeptCopy
	Config   string
	Actions  bool
}

// moveRow is one journal record with what the page says of it.
type moveRow struct {
	*rebalance.MoveRecord
	Step, Steps int    // the phase's place among the mode's phases
	Refused     string // the refused-writes windows, "" while none has ended (before the flip or give-back)
	Elapsed     time.Duration
	// Lag is an online move's replication lag, read live on its source
	// while it replicates (rebalance.MoveLag); LagNA says why there is
	// none for such a move ("" for a move that does not replicate).
	Lag   *rebalance.Lag
	LagNA string
}

// lagTimeout bounds the read of one move's lag on its source host.
const lagTimeout = 5 * time.Second

func (s *Console) movesView(ctx context.Context) (*movesView, error) {
	c, release := s.use()
	defer release()
	recs, err := rebalance.Moves(ctx, c, true)
	if err != nil {
		return nil, err
	}
	kept, err := rebalance.RetainedCopies(ctx, c)
	if err != nil {
		return nil, err
	}
	v := &movesView{Retained: kept, Config: s.configPath(), Actions: s.opts.Actions}
	now := time.Now()
	for _, r := range recs {
		row := moveRow{MoveRecord: r}
		phases := rebalance.Phases(r.Mode)
		row.Steps = len(phases)
		row.Step = slices.Index(phases, r.Phase) + 1
		if d, ok := r.Refused(); ok {
			row.Refused = d.Round(time.Millisecond).String()
		}
		end := now
		if r.Finished != nil {
			end = *r.Finished
		}
		row.Elapsed = end.Sub(r.Started).Round(time.Second)
		if r.Phase.Open() {
			v.Open = append(v.Open, row)
		} else {
			v.Finished = append(v.Finished, row)
		}
	}
	// The lags, read at once: a source that does not answer costs the
	// page lagTimeout, not that per move.
	var wg sync.WaitGroup
	for i := range v.Open {
		row := &v.Open[i]
		if !row.Replicating() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lag, err := rebalance.MoveLag(ctx, c, row.MoveRecord, lagTimeout)
			if err != nil {
				row.LagNA = err.Error()
				return
			}
			row.Lag = lag
		}()
	}
	wg.Wait()
	slices.Reverse(v.Finished)
	if len(v.Finished) > finishedShown {
		v.Finished = v.Finished[:finishedShown]
	}
	return v, nil
}

func (s *Console) pageMoves(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	v, err := s.movesView(ctx)
	if err != nil {
		s.failPage(w, "moves", err)
		return
	}
	s.page(w, http.StatusOK, "moves.html", "moves", "moves", v)
}

func (s *Console) partMoves(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	v, err := s.movesView(ctx)
	if err != nil {
		s.render(w, http.StatusBadGateway, "error-part", err.Error())
		return
	}
	s.render(w, http.StatusOK, "moves-part", v)
}

// apiMoves is `shardid rebalance status --json` (?all=1: --all).
func (s *Console) apiMoves(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	c, release := s.use()
	defer release()
	recs, err := rebalance.Moves(ctx, c, r.URL.Query().Get("all") == "1")
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rebalance.MoveList{Moves: recs})
}
