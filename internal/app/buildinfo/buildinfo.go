// Package buildinfo tells which shardid this binary is: its module version
// (or the VCS revision of a source build), the Go that built it, and the
// schema versions it writes. It must never reach the network or a database:
// `shardid version` answers on a machine with nothing running.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/shardid/shardid/migrations"
	shsql "github.com/shardid/shardid/sql"
)

// stamped is set by `make release` (-ldflags -X) to the release's version;
// it wins over the module version, which is "(devel)" for a build from a
// checkout.
var stamped string

// Info describes the running binary. Its JSON shape is a stable interface
// (docs/compatibility.md).
type Info struct {
	Version       string `json:"version"`            // v0.1.0, or (devel) for a source build
	Revision      string `json:"revision,omitempty"` // VCS revision of a source build
	Time          string `json:"time,omitempty"`     // VCS commit time of a source build
	Modified      bool   `json:"modified,omitempty"` // the work tree had uncommitted changes
	Go            string `json:"go"`
	CatalogSchema uint   `json:"catalog_schema"` // the catalog schema version this binary migrates to
	Generator     int    `json:"generator"`      // the generator version this binary installs
}

// Read returns the running binary's Info.
func Read() Info {
	info := Info{Version: "(devel)", Go: runtime.Version(), Generator: shsql.Version}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if stamped != "" {
		info.Version = stamped
	}
	// The embedded files are part of the binary: an error here is a broken build.
	info.CatalogSchema, _ = migrations.Catalog.Latest()
	return info
}

// String is the one-line form `shardid --version` prints.
func (i Info) String() string {
	s := "shardid " + i.Version
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if i.Modified {
			s += ", modified"
		}
		if i.Time != "" {
			s += ", " + i.Time
		}
		s += ")"
	}
	return s + ", " + i.Go
}
