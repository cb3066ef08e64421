package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/verify"
)

// verifyTimeout bounds a verify the console runs (--deep reads every
// stored id: long on a big cluster).
const verifyTimeout = time.Hour

// checksView is the checks page's data.
type checksView struct {
	Last          *verifyRun
	Checks        []checkRow
	Migrations    bool
	MigrationsDir string
}

// checkRow is one check of the last verify: how many problems it found.
type checkRow struct {
	Name     string
	Problems []verify.Problem
}

func (s *Console) checksView() *checksView {
	s.mu.Lock()
	last := s.lastVerify
	s.mu.Unlock()
	v := &checksView{Last: last, Migrations: s.opts.Migrations != nil, MigrationsDir: s.opts.MigrationsDir}
	if last != nil && last.Report != nil {
		for _, c := range last.Report.Checks {
			v.Checks = append(v.Checks, checkRow{Name: c, Problems: last.Report.Failed(c)})
		}
	}
	return v
}

func (s *Console) pageChecks(w http.ResponseWriter, r *http.Request) {
	s.page(w, http.StatusOK, "checks.html", "checks", "checks", s.checksView())
}

func (s *Console) partVerify(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "verify-part", s.checksView())
}

// apiLastVerify is the last verify's report as `shardid verify --json`
// prints it; 404 before the console ran one.
func (s *Console) apiLastVerify(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	last := s.lastVerify
	s.mu.Unlock()
	if last == nil || last.Report == nil {
		writeError(w, http.StatusNotFound, "no verify has run since the console started: POST /api/verify runs one")
		return
	}
	writeJSON(w, http.StatusOK, last.Report)
}

// verifyEvent is one line of the stream POST /api/verify answers with.
type verifyEvent struct {
	Event     string          `json:"event"` // started, running, problem, note, done, error
	Deep      bool            `json:"deep,omitempty"`
	ElapsedMS int64           `json:"elapsed_ms,omitempty"`
	Problem   *verify.Problem `json:"problem,omitempty"`
	Report    *verify.Report  `json:"report,omitempty"` // on done: as verify --json prints it
	Checks    []string        `json:"checks,omitempty"`
	Shards    int             `json:"shards,omitempty"`
	Hosts     int             `json:"hosts,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// apiRunVerify runs verify (?deep=1: --deep), read-only, and streams its
// course as NDJSON: started, running every second, each problem and
// note, then done with the report (or error). One verify at a time: a
// second request gets 409.
func (s *Console) apiRunVerify(w http.ResponseWriter, r *http.Request) {
	deep := r.URL.Query().Get("deep") == "1"
	s.mu.Lock()
	if s.verifying {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "a verify is running: wait for its result")
		return
	}
	s.verifying = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.verifying = false
		s.mu.Unlock()
	}()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(e verifyEvent) {
		_ = enc.Encode(e)
		if fl != nil {
			fl.Flush()
		}
	}
	run := &verifyRun{Deep: deep, Started: time.Now().UTC()}
	send(verifyEvent{Event: "started", Deep: deep})

	ctx, cancel := context.WithTimeout(r.Context(), verifyTimeout)
	defer cancel()
	type result struct {
		rep *verify.Report
		err error
	}
	done := make(chan result, 1)
	c, release := s.use()
	go func() {
		defer release()
		rep, err := verify.Verify(ctx, c, verify.Options{Deep: deep})
		done <- result{rep, err}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var res result
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-tick.C:
			send(verifyEvent{Event: "running", ElapsedMS: time.Since(run.Started).Milliseconds()})
		}
	}
	run.Finished = time.Now().UTC()
	if res.err != nil {
		if errors.Is(res.err, context.Canceled) && r.Context().Err() != nil {
			return // the browser went away: nothing to record
		}
		run.Err = res.err.Error()
		s.setLastVerify(run)
		send(verifyEvent{Event: "error", Error: run.Err})
		return
	}
	run.Report = res.rep
	s.setLastVerify(run)
	for i := range res.rep.Problems {
		send(verifyEvent{Event: "problem", Problem: &res.rep.Problems[i]})
	}
	for i := range res.rep.Notes {
		send(verifyEvent{Event: "note", Problem: &res.rep.Notes[i]})
	}
	send(verifyEvent{Event: "done", Report: res.rep, Checks: res.rep.Checks, Shards: res.rep.Shards, Hosts: res.rep.Hosts,
		ElapsedMS: res.rep.Elapsed.Milliseconds()})
}

func (s *Console) setLastVerify(run *verifyRun) {
	s.mu.Lock()
	s.lastVerify = run
	s.mu.Unlock()
}

// migrationsView is the migrations part's data: shards per version and
// the failures, from the same status `shardid migrate status` reads.
type migrationsView struct {
	Latest     int
	Versions   []versionCount
	Behind     string
	Ahead      string
	Failed     []migrate.ShardVersion
	Unreadable []migrate.ShardVersion
	Total      int
}

type versionCount struct{ Version, Shards int }

func (s *Console) readMigrations(ctx context.Context) (*migrate.MigrationStatus, error) {
	if s.opts.Migrations == nil {
		return nil, errNoMigrations
	}
	c, release := s.use()
	defer release()
	return migrate.ReadMigrationStatus(ctx, c, s.opts.Migrations)
}

var errNoMigrations = errors.New("no migrations directory: start the console with --dir DIR or name it in the cluster file (migrations: ./migrations)")

func (s *Console) partMigrations(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	st, err := s.readMigrations(ctx)
	if err != nil {
		s.render(w, http.StatusOK, "error-part", err.Error())
		return
	}
	sum := st.Summary()
	v := &migrationsView{Latest: st.Latest, Total: len(st.Shards), Behind: shortList(formatList(sum.Behind)), Ahead: shortList(formatList(sum.Ahead))}
	vs := sum.Versions()
	for i := len(vs) - 1; i >= 0; i-- {
		v.Versions = append(v.Versions, versionCount{vs[i], sum.AtVersion[vs[i]]})
	}
	for _, sh := range st.Shards {
		switch {
		case sh.Version < 0:
			v.Unreadable = append(v.Unreadable, sh)
		case sh.Failure != nil:
			v.Failed = append(v.Failed, sh)
		}
	}
	s.render(w, http.StatusOK, "migrations-part", v)
}

// apiMigrations is `shardid migrate status --json`.
func (s *Console) apiMigrations(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	st, err := s.readMigrations(ctx)
	switch {
	case errors.Is(err, errNoMigrations):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusBadGateway, err.Error())
	default:
		writeJSON(w, http.StatusOK, st)
	}
}
