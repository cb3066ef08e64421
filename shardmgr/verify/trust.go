package verify

import (
	"context"
	"maps"
	"slices"

	"github.com/shardid/shardid/internal/pgtrust"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
)

// CheckTrust: schema shardid on the catalog and on every host, and every
// shard schema's owner and version tables, were made by the toolkit's
// role (the role verify's DSN logs in as) or a superuser, and no other
// role put a trigger, rule or policy on them or holds CREATE on schema
// shardid (pgtrust.Findings, the check init, migrations and the
// generators run before they write). Such a role could run its code as
// whoever next writes there.
const CheckTrust = "trust"

// trustFindings lists what the toolkit does not trust in a database:
// schema shardid, every object in it, and, given shard schemas, each
// one's owner and version tables.
func trustFindings(ctx context.Context, q pgtrust.Querier, shardSchemas []string) ([]pgtrust.Finding, error) {
	found, err := pgtrust.Findings(ctx, q, []string{shardschema.ToolkitSchema}, nil)
	if err != nil || len(shardSchemas) == 0 {
		return found, err
	}
	more, err := pgtrust.Findings(ctx, q, shardSchemas, []string{shardschema.VersionTable, shardschema.FailureTable})
	return append(found, more...), err
}

// reportUntrusted records each finding as a problem of host ("" for the
// catalog).
func (v *verifier) reportUntrusted(host string, found []pgtrust.Finding) {
	for _, f := range found {
		v.problemFix(FixUntrusted, CheckTrust, -1, host,
			"%s belongs to %s, not to the role verify logs in as or a superuser: %s can run its code as whoever next writes there; check what it holds, then fix: %s",
			f.Object, f.Owner, f.Owner, f.Fix)
	}
}

// scanTrust checks the host's schema shardid and shard schemas
// (CheckTrust).
func (v *verifier) scanTrust(ctx context.Context, hs *hostScan) error {
	schemas := map[string]bool{}
	maps.Copy(schemas, hs.schemas)
	for s := range hs.generators {
		schemas[s] = true
	}
	for s := range hs.retired {
		schemas[s] = true
	}
	found, err := trustFindings(ctx, hs.pool, slices.Sorted(maps.Keys(schemas)))
	if err != nil {
		return err
	}
	v.reportUntrusted(hs.name, found)
	return nil
}
