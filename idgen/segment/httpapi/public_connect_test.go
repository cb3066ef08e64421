package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/internal/logbuf"
)

// serve warns once per source that PUBLIC may connect to, naming the
// source (its address and its place in the config): not once per source
// with only a database name that several sources share. A source closed
// to PUBLIC gets no warning. (Failed before: the lines named no source.)
func TestServeWarnsAboutPublicConnectOncePerSourceNamed(t *testing.T) {
	t.Parallel()
	srv := pgtest.Servers(t, 1)[0]
	var sources []string
	for range 3 {
		sources = append(sources, pgtest.NewDB(t, srv))
	}
	closed, err := pgx.ParseConfig(sources[2])
	require.NoError(t, err)
	_, err = pgtest.Pool(t, srv.DSN("postgres")).Exec(context.Background(),
		"REVOKE CONNECT ON DATABASE "+pgx.Identifier{closed.Database}.Sanitize()+" FROM PUBLIC")
	require.NoError(t, err)

	var log logbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	alloc, closeAll, err := httpapi.OpenAllocator(context.Background(), &segment.Config{Sources: sources,
		Tags: map[string]segment.TagConfig{"payment": {}}}, logger)
	require.NoError(t, err)
	t.Cleanup(closeAll)
	_ = alloc
	require.Eventually(t, func() bool { return strings.Count(log.String(), "segment source ready") == len(sources) },
		3*time.Minute, 20*time.Millisecond, "every source prepared: %s", log.String())

	var warnings []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "PUBLIC may connect") {
			warnings = append(warnings, line)
		}
	}
	require.Len(t, warnings, 2, "one line per source PUBLIC may connect to:\n%s", strings.Join(warnings, "\n"))
	for i, dsn := range sources[:2] {
		cc, err := pgx.ParseConfig(dsn)
		require.NoError(t, err)
		want := []string{fmt.Sprintf("config=segments.sources[%d]", i), fmt.Sprintf("source=%s:%d/%s", cc.Host, cc.Port, cc.Database),
			// The statement names the database (quoted, and escaped by
			// the text handler).
			"REVOKE CONNECT ON DATABASE \\\"" + cc.Database + "\\\" FROM PUBLIC"}
		n := 0
		for _, w := range warnings {
			if strings.Contains(w, want[0]) {
				n++
				for _, s := range want[1:] {
					require.Contains(t, w, s)
				}
			}
		}
		require.Equal(t, 1, n, "source %d named once: %s", i, strings.Join(warnings, "\n"))
	}
}
