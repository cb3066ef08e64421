package verify

import (
	"testing"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
