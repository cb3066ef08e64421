package shardmgr_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

// The router's pool-size default applies unless the DSN sets
// pool_max_conns, as parsed: an application_name that merely contains
// the text kept pgxpool's smaller default (the router tested the DSN's
// text). Failed before (pg1's pool had pgxpool's 4 on 2 CPUs).
func TestRouterPoolSizeFromTheParsedDSN(t *testing.T) {
	t.Parallel()
	cfg := initCluster(t, 4)
	with := func(dsn, param string) string {
		if strings.Contains(dsn, "?") {
			return dsn + "&" + param
		}
		return dsn + "?" + param
	}
	cfg.Hosts[0].AppDSN = with(cfg.Hosts[0].DSN, "application_name=pool_max_conns_app")
	cfg.Hosts[1].AppDSN = with(cfg.Hosts[1].DSN, "pool_max_conns=3")
	r := openRouter(t, cfg)
	require.Equal(t, shardmgr.DefaultHostPoolSize(), shardmgr.RouterPool(r, cfg.Hosts[0].Name).Config().MaxConns)
	require.Equal(t, int32(3), shardmgr.RouterPool(r, cfg.Hosts[1].Name).Config().MaxConns)
}
