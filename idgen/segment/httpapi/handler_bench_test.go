package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// The handler alone, without sockets: what one id request costs on top of
// net/http, next to the bare counter handler of BenchmarkFigures.
//
//	go test -run '^$' -bench Handler -benchmem ./idgen/segment/httpapi

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

func benchHandler(b *testing.B, h http.Handler, target string) {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

func BenchmarkHandler(b *testing.B) {
	alloc := newAllocator(b, pgtest.Servers(b, 1), benchTags)
	h, err := httpapi.New(alloc, httpapi.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("bare", func(b *testing.B) { benchHandler(b, bareServer().Handler, "/") })
	b.Run("single", func(b *testing.B) { benchHandler(b, h, "/v1/ids/payment") })
	b.Run("count1000", func(b *testing.B) { benchHandler(b, h, "/v1/ids/bulk?count=1000") })
}
