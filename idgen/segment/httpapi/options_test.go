package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment/httpapi"
)

// A value an option cannot use fails New naming the option;
// WithLogger(nil) is one, as in every package (shardmgr's doc.go). Failed
// before: WithLogger(nil) was taken as a nil logger, WithRegistry(nil) as
// no registry.
func TestOptionsAreCheckedAndNamed(t *testing.T) {
	for name, opt := range map[string]httpapi.Option{
		"WithLogger(nil)":             httpapi.WithLogger(nil),
		"WithRegistry(nil)":           httpapi.WithRegistry(nil),
		"WithFailureLogInterval(0s)":  httpapi.WithFailureLogInterval(0),
		`WithCheck("snowflake", nil)`: httpapi.WithCheck("snowflake", nil),
	} {
		h, err := httpapi.New(nil, opt)
		require.Nil(t, h, name)
		require.ErrorContains(t, err, "httpapi: "+name+": want ")
	}
}
