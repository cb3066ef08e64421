package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/shardid/shardid/shardmgr/install"
)

// pageTimeout bounds the catalog and host reads behind one page: a host
// that does not answer is shown as unreachable within 5 s (install's
// probe), the rest is the catalog's.
const pageTimeout = time.Minute

var funcs = template.FuncMap{
	"pct": func(f float64) string { return strconv.FormatFloat(f, 'f', 4, 64) + "%" },
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	},
	"last": func(n int) int { return n - 1 },
	"ms":   func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"secs": func(s *float64) string { return strconv.FormatFloat(*s, 'f', 3, 64) + " s" },
	// ms1 is a lag in milliseconds as read from the server.
	"ms1": func(ms *float64) string { return strconv.FormatFloat(*ms, 'f', 1, 64) + " ms" },
	// f1 is a value with one decimal ("" for none): a *float64 given to
	// printf prints its address.
	"f1": func(f *float64) string {
		if f == nil {
			return ""
		}
		return strconv.FormatFloat(*f, 'f', 1, 64)
	},
}

// page is what every full page's frame shows.
type page struct {
	Title    string
	Nav      string // the current page: map, moves, checks, decode, service, audit
	Refresh  int64  // ms between refreshes of the page's live part
	Actions  bool
	Service  bool
	Cluster  string
	Body     any
	Config   string
	Rendered time.Time
}

// render executes template name with data and sends it with status, as a
// whole or not at all: a template error is a 500, not half a page. The
// status is written here, after the headers, because headers set after
// WriteHeader are not sent.
func (s *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("console: render "+name, "err", err)
		http.Error(w, "console: render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// page renders a full page around body, sent with status.
func (s *Console) page(w http.ResponseWriter, status int, name, nav, title string, body any) {
	s.render(w, status, name, page{
		Title: title, Nav: nav, Refresh: s.opts.Refresh.Milliseconds(), Actions: s.opts.Actions,
		Service: s.opts.ServeURL != "", Cluster: s.current().Config().Cluster, Body: body, Config: s.configPath(),
		Rendered: time.Now().UTC(),
	})
}

// configPath is the cluster file's path for the hints the pages give.
func (s *Console) configPath() string {
	if s.opts.ConfigPath != "" {
		return s.opts.ConfigPath
	}
	return s.current().Config().Path
}

// failPage shows why a page could not be built, as a page.
func (s *Console) failPage(w http.ResponseWriter, nav string, err error) {
	s.page(w, http.StatusBadGateway, "error.html", nav, "error", err.Error())
}

func (s *Console) reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), pageTimeout)
}

func (s *Console) pageMap(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	v, err := s.mapView(ctx, parseFilter(r.URL.Query(), s.current().Config().Shards))
	if err != nil {
		s.failPage(w, "map", err)
		return
	}
	status := http.StatusOK
	if r.URL.Query().Get("shard") != "" {
		r.SetPathValue("id", r.URL.Query().Get("shard"))
		if v.Detail, _, err = s.shardDetail(r); err != nil {
			status = http.StatusBadRequest
		}
	}
	s.page(w, status, "map.html", "map", "map", v)
}

func (s *Console) partMap(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	v, err := s.mapView(ctx, parseFilter(r.URL.Query(), s.current().Config().Shards))
	if err != nil {
		s.render(w, http.StatusBadGateway, "error-part", err.Error())
		return
	}
	s.render(w, http.StatusOK, "map-part", v)
}

func (s *Console) partShard(w http.ResponseWriter, r *http.Request) {
	d, status, err := s.shardDetail(r)
	if err != nil {
		s.render(w, status, "error-part", err.Error())
		return
	}
	s.render(w, http.StatusOK, "shard-part", d)
}

func (s *Console) apiShard(w http.ResponseWriter, r *http.Request) {
	d, status, err := s.shardDetail(r)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Console) shardDetail(r *http.Request) (*install.ShardDetail, int, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("shard %q: not a number", r.PathValue("id"))
	}
	c, release := s.use()
	defer release()
	if err := c.Config().CheckShard(id); err != nil {
		return nil, http.StatusNotFound, err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	d, err := install.DescribeShard(ctx, c, id)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	return d, http.StatusOK, nil
}

func (s *Console) apiStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	c, release := s.use()
	defer release()
	st, err := install.ClusterStatus(ctx, c)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// apiHosts is `shardid host list --json`, each probe bounded by
// hostProbeTimeout.
func (s *Console) apiHosts(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	list, err := s.hostsNow(ctx)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, list)
}
