package snowflake

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
)

// MaxCount is the largest count one request may ask for.
const MaxCount = 1000

// Handler serves ids of one generator over HTTP:
//
//	GET /v1/snowflake?count=N   {"ids":["175928847299117063",...]}
//
// Ids are decimal strings (JavaScript numbers lose precision above 2^53),
// strictly increasing within a response. Errors are {"error":"..."}: 400
// for a bad count, 405 for a method other than GET or HEAD, 413 for a
// request with a body, 503 while the generator may not issue (lease not
// renewed or being taken again, clock stepped back). Any other path is the
// caller's to route.
type Handler struct {
	g    *Generator
	bufs sync.Pool
}

// NewHandler returns the HTTP face of g.
func NewHandler(g *Generator) *Handler {
	return &Handler{g: g, bufs: sync.Pool{New: func() any { b := make([]int64, MaxCount); return &b }}}
}

// Path is the one path Handler serves.
const Path = "/v1/snowflake"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		writeError(w, http.StatusNotFound, "no such path "+strconv.Quote(r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return
	}
	if r.ContentLength != 0 {
		// Nothing here reads a body: a length above zero or a chunked one
		// (-1) is refused rather than left unread.
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, "this API takes no request body")
		return
	}
	count := 1
	if v := r.URL.Query().Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxCount {
			writeError(w, http.StatusBadRequest, "count must be an integer from 1 to "+strconv.Itoa(MaxCount)+", got "+strconv.Quote(v))
			return
		}
		count = n
	}
	bp := h.bufs.Get().(*[]int64)
	defer h.bufs.Put(bp)
	ids := (*bp)[:count]
	for got := 0; got < count; {
		n, err := h.g.NextIDs(ids[got:])
		if err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, ErrOverTimeLimit) {
				code = http.StatusInternalServerError
			}
			writeError(w, code, err.Error())
			return
		}
		got += n
	}
	out := make([]byte, 0, 16+count*22)
	out = append(out, `{"ids":[`...)
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = strconv.AppendInt(out, id, 10)
		out = append(out, '"')
	}
	out = append(out, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(out)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}
