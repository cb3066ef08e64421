package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/shardid/shardid/shardmgr/audit"
)

// The audit log: every request to an action endpoint that carries the
// token is recorded in the catalog (shardid.console_audit, package
// shardmgr/audit) with who asked, what and the result; the /audit page and
// /api/audit show it. Requests without the token are logged, not recorded:
// anyone who reaches the console could otherwise fill the catalog.
//
// Who is the value of the header Options.UserHeader names (set by an
// authenticating proxy in front of the console) when the request has it,
// else the client's address. A write of the audit log that fails is
// logged and said in the action's answer (audit_error); it never changes
// the action's own status or result.

// auditLimit is how many entries the audit page shows unless asked.
const auditLimit = 50

// auditRec is one action request being recorded.
type auditRec struct {
	who, action string
	start       time.Time
	id          int64 // the row Begin wrote; 0 when none
}

// actionParams are an action's parameters as the audit log keeps them:
// every field always there, so that the rows read alike.
type actionParams struct {
	Shards []int  `json:"shards"`
	All    bool   `json:"all"`
	Mode   string `json:"mode"`
}

func paramsOf(req actionRequest) actionParams {
	p := actionParams{Shards: req.Shards, All: req.All, Mode: string(req.Mode)}
	if p.Shards == nil {
		p.Shards = []int{}
	}
	return p
}

// refusal is the answer to an action request refused before it ran.
type refusal struct {
	Error      string `json:"error"`
	AuditError string `json:"audit_error,omitempty"`
}

// who is who sent r: the header Options.UserHeader names when set and
// present, else the client's address.
func (s *Console) who(r *http.Request) string {
	if s.opts.UserHeader != "" {
		if v := r.Header.Get(s.opts.UserHeader); v != "" {
			return v
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

func (s *Console) auditOf(r *http.Request, action string) *auditRec {
	return &auditRec{who: s.who(r), action: action, start: time.Now()}
}

// auditCtx bounds an audit write on the console's context without its
// cancellation: an apply that Close stopped still records its end
// (audit.Timeout bounds each call).
func (s *Console) auditCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(s.ctx), audit.Timeout)
}

// auditFailed logs a write of the audit log that failed and returns the
// line the action's answer carries.
func (s *Console) auditFailed(rec *auditRec, err error) string {
	s.log.Warn("console: audit log not written", "action", rec.action, "who", rec.who, "err", err)
	return "not recorded in the audit log: " + err.Error()
}

// refused records a request refused before its action ran; it returns
// why the audit log does not hold it ("" when it does).
func (s *Console) refused(rec *auditRec, params any, msg string) string {
	ctx, cancel := s.auditCtx()
	defer cancel()
	c, release := s.use()
	defer release()
	if _, err := audit.Record(ctx, c, rec.who, rec.action, params, msg, 0); err != nil {
		return s.auditFailed(rec, err)
	}
	return ""
}

// begin records that an action starts; st says when it could not.
func (s *Console) begin(rec *auditRec, params actionParams, st *actionState) {
	ctx, cancel := s.auditCtx()
	defer cancel()
	c, release := s.use()
	defer release()
	id, err := audit.Begin(ctx, c, rec.who, rec.action, params)
	if err != nil {
		msg := s.auditFailed(rec, err)
		s.mu.Lock()
		st.AuditError = msg
		s.mu.Unlock()
		return
	}
	rec.id = id
}

// end records an action's end (err nil: ok): it completes the row begin
// wrote, or writes the whole row when begin could not.
func (s *Console) end(rec *auditRec, params actionParams, st *actionState, actionErr error) {
	ctx, cancel := s.auditCtx()
	defer cancel()
	c, release := s.use()
	defer release()
	took := time.Since(rec.start)
	var err error
	if rec.id != 0 {
		err = audit.Finish(ctx, c, rec.id, audit.ResultOf(actionErr), took)
	} else {
		_, err = audit.Record(ctx, c, rec.who, rec.action, params, audit.ResultOf(actionErr), took)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		st.AuditError = s.auditFailed(rec, err)
	} else {
		st.AuditError = ""
	}
}

// auditQuery reads the audit page's parameters: limit (1..audit.MaxList,
// default auditLimit) and before (an entry's id).
func auditQuery(q url.Values) (limit int, before int64, err error) {
	limit = auditLimit
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > audit.MaxList {
			return 0, 0, fmt.Errorf("limit %q: want a number from 1 to %d", v, audit.MaxList)
		}
	}
	if v := q.Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 1 {
			return 0, 0, fmt.Errorf("before %q: want an entry's id (a positive number)", v)
		}
	}
	return limit, before, nil
}

// auditView is what the audit page and /api/audit show.
type auditView struct {
	Entries []audit.Entry `json:"entries"`
	// More says there are older entries; Next is the URL of the page
	// that shows them ("" when none).
	More bool   `json:"more"`
	Next string `json:"next"`
	// Limit is the page's size.
	Limit int `json:"-"`
	// WhoFrom says where Who comes from, for the page.
	WhoFrom string `json:"-"`
}

// readAudit reads the entries r asks for; the status is 400 for a
// request it does not understand, 502 when the catalog does not answer.
func (s *Console) readAudit(r *http.Request, path string) (*auditView, int, error) {
	limit, before, err := auditQuery(r.URL.Query())
	if err != nil {
		return nil, http.StatusBadRequest, err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	c, release := s.use()
	defer release()
	entries, more, err := audit.List(ctx, c, limit, before)
	if err != nil {
		if errors.Is(err, audit.ErrInput) {
			return nil, http.StatusBadRequest, err
		}
		return nil, http.StatusBadGateway, err
	}
	v := &auditView{Entries: entries, More: more, Limit: limit, WhoFrom: "the client's address"}
	if h := s.opts.UserHeader; h != "" {
		v.WhoFrom = "the " + h + " header, else the client's address"
	}
	if v.Entries == nil {
		v.Entries = []audit.Entry{}
	}
	if more {
		v.Next = fmt.Sprintf("%s?limit=%d&before=%d", path, limit, entries[len(entries)-1].ID)
	}
	return v, http.StatusOK, nil
}

func (s *Console) pageAudit(w http.ResponseWriter, r *http.Request) {
	v, status, err := s.readAudit(r, "/audit")
	if err != nil {
		s.page(w, status, "error.html", "audit", "audit log", err.Error())
		return
	}
	s.page(w, http.StatusOK, "audit.html", "audit", "audit log", v)
}

func (s *Console) apiAudit(w http.ResponseWriter, r *http.Request) {
	v, status, err := s.readAudit(r, "/api/audit")
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
}
