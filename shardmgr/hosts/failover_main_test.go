package hosts

import (
	"testing"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// TestMain: the lead merges this with the host commands' helpers_test.go
// should both define one.
func TestMain(m *testing.M) { pgtest.Main(m) }
