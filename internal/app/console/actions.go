package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/shardid/shardid/shardmgr/rebalance"
)

// Actions the console can take when built with Options.Actions. Each is
// the package function the CLI command of the same name calls.
const (
	actionApply   = "apply"   // shardid rebalance apply
	actionAbort   = "abort"   // shardid rebalance abort [--shard N]
	actionCleanup = "cleanup" // shardid rebalance cleanup [--all]
)

// actionRequest is the body of POST /api/actions/{action}: Confirm must
// repeat the action's name (what the page's confirmation asks the
// operator to type).
type actionRequest struct {
	Confirm string `json:"confirm"`
	Shards  []int  `json:"shards,omitempty"` // abort: these shards' moves (none: every unfinished move)
	All     bool   `json:"all,omitempty"`    // cleanup: every retained copy, also those inside their keep period
	// Mode is apply's move mode, as `rebalance apply --mode`: auto (""),
	// online or offline.
	Mode rebalance.MoveMode `json:"mode,omitempty"`
}

// applyMode is the mode the console's apply runs in unless asked: auto,
// unlike the CLI's online. The CLI's operator chooses with a flag and
// reads the preflight's refusal in the terminal; the console's button
// would otherwise always fail on a host that cannot run an online move
// (a managed server without superuser on PostgreSQL 15), and auto says
// per move why it went offline.
const applyMode = rebalance.MoveAuto

// checkMode is req.Mode with its default, or an error naming the modes.
func checkMode(m rebalance.MoveMode) (rebalance.MoveMode, error) {
	switch m {
	case "":
		return applyMode, nil
	case rebalance.MoveAuto, rebalance.MoveOnline, rebalance.MoveOffline:
		return m, nil
	}
	return "", fmt.Errorf("mode %q: want auto, online or offline", m)
}

// actionState is the last action the console started.
type actionState struct {
	Action   string     `json:"action"`
	Mode     string     `json:"mode,omitempty"` // apply's mode
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	Result   any        `json:"result,omitempty"`
	Error    string     `json:"error,omitempty"`
	// AuditError says why the audit log does not record this action (or
	// its end); the action's own result is the fields above.
	AuditError string `json:"audit_error,omitempty"`
}

// apiAction takes an action: only with Options.Actions (else 403, before
// anything is read), the token (403) and the confirmation (400). Apply
// runs on after the answer (202; /api/actions/last follows it); abort
// and cleanup answer with their result.
//
// Every request that carries the token is recorded in the audit log
// (audit.go): a refused one with its refusal, an action when it starts
// and when it ends. The audit log never changes an action's answer.
func (s *Console) apiAction(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("action")
	if !s.opts.Actions {
		writeError(w, http.StatusForbidden, "the console is read-only: start it with --actions to "+name)
		return
	}
	if !s.tokenOK(r) {
		s.log.Warn("console: action refused: missing or wrong token", "action", name, "who", s.who(r))
		writeError(w, http.StatusForbidden, "missing or wrong action token ("+TokenHeader+")")
		return
	}
	rec := s.auditOf(r, name)
	refuse := func(status int, msg string, params any) {
		writeJSON(w, status, refusal{Error: msg, AuditError: s.refused(rec, params, msg)})
	}
	if name != actionApply && name != actionAbort && name != actionCleanup {
		refuse(http.StatusNotFound, "no action "+name, nil)
		return
	}
	var req actionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		refuse(http.StatusBadRequest, "body: "+err.Error(), nil)
		return
	}
	params := paramsOf(req)
	if req.Confirm != name {
		refuse(http.StatusBadRequest, fmt.Sprintf("not confirmed: send {\"confirm\":%q}", name), params)
		return
	}
	mode, err := checkMode(req.Mode)
	if err != nil {
		refuse(http.StatusBadRequest, err.Error(), params)
		return
	}
	st := &actionState{Action: name, Started: time.Now().UTC()}
	if name == actionApply {
		st.Mode = string(mode)
		params.Mode = string(mode)
	}
	s.mu.Lock()
	if s.action != nil && s.action.Finished == nil {
		busy := s.action.Action
		s.mu.Unlock()
		refuse(http.StatusConflict, busy+" is running: wait for it", params)
		return
	}
	s.action = st
	s.mu.Unlock()
	s.log.Info("console: action", "action", name, "mode", st.Mode, "shards", req.Shards, "all", req.All, "who", rec.who, "from", r.RemoteAddr)
	s.begin(rec, params, st)

	// The handle is held until the action ends: a reread of the
	// cluster file meanwhile does not close it under the action.
	c, release := s.use()
	switch name {
	case actionApply:
		go func() {
			defer release()
			res, err := rebalance.Apply(s.ctx, c, rebalance.ApplyOptions{Move: rebalance.MoveOptions{Mode: mode, Migrations: s.opts.Migrations}})
			s.finish(st, res, err)
			s.end(rec, params, st, err)
		}()
		writeJSON(w, http.StatusAccepted, s.snapshot(st))
	case actionAbort:
		// On the console's context, not the request's: an abort or a
		// cleanup half done because the browser went away helps nobody
		// (each bounds its own waits).
		defer release()
		res, err := rebalance.AbortMove(s.ctx, c, req.Shards)
		s.finish(st, map[string]any{"aborted": res}, err) // as rebalance abort --json
		s.end(rec, params, st, err)
		writeJSON(w, statusOf(err), s.snapshot(st))
	case actionCleanup:
		defer release()
		res, err := rebalance.Cleanup(s.ctx, c, rebalance.CleanupOptions{All: req.All})
		s.finish(st, res, err)
		s.end(rec, params, st, err)
		writeJSON(w, statusOf(err), s.snapshot(st))
	}
}

func statusOf(err error) int {
	if err != nil {
		return http.StatusBadGateway
	}
	return http.StatusOK
}

// finish records an action's end.
func (s *Console) finish(st *actionState, res any, err error) {
	now := time.Now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Finished, st.Result = &now, res
	if err != nil {
		st.Error = err.Error()
		s.log.Warn("console: action failed", "action", st.Action, "err", err)
	}
}

// snapshot copies st under the lock.
func (s *Console) snapshot(st *actionState) actionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *st
}

// apiActionStatus is the last action's state; 404 when none ran.
func (s *Console) apiActionStatus(w http.ResponseWriter, r *http.Request) {
	if !s.opts.Actions {
		writeError(w, http.StatusForbidden, "the console is read-only: it takes no actions")
		return
	}
	s.mu.Lock()
	st := s.action
	s.mu.Unlock()
	if st == nil {
		writeError(w, http.StatusNotFound, "no action has run")
		return
	}
	writeJSON(w, http.StatusOK, s.snapshot(st))
}
