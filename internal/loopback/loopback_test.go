package loopback

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostAllowed(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:8080": true, "127.0.0.1:1": true, "127.3.4.5": true, "[::1]:80": true, "::1": true,
		"ids.internal": true, "IDS.internal:8080": true,
		"attacker.example": false, "attacker.example:8080": false, "10.0.0.1:80": false, "": false, "localhost.attacker.example": false,
	} {
		require.Equal(t, want, HostAllowed(host, []string{"ids.internal"}), host)
	}
	require.False(t, HostAllowed("ids.internal", nil))
}
