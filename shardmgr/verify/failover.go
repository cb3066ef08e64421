package verify

import (
	"context"
	"errors"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// CheckFailover: each host's server is the one the catalog recorded (the
// same system identifier, the same timeline): a server promoted since,
// to which the host was pointed without `shardid host failover`, may hand
// out ids the old primary handed out and never replicated
// (docs/uniqueness.md#failover).
const CheckFailover = "failover"

var failoverPass = &pass{func(v *verifier, ctx context.Context) bool { v.checkFailover(ctx); return true }}

// scanIdentity reads which server the host's DSN reached. A server that
// will not tell (pg_control_system() revoked) leaves it unknown.
func scanIdentity(ctx context.Context, hs *hostScan) error {
	id, err := pg.ReadServerIdentity(ctx, hs.pool)
	if errors.Is(err, pg.ErrIdentityDenied) {
		return nil
	}
	if err != nil {
		return err
	}
	hs.identity = &id
	return nil
}

// checkFailover compares each scanned host's server with the catalog's
// record of it. The counters of a standby promoted without the command
// are where the old primary's last replicated WAL left them, and the
// rows it handed out ids to after that are gone with it: neither the
// counter check nor the stored ids can see what it lost. The timeline
// can: a promotion starts a new one, and only the command records it.
func (v *verifier) checkFailover(ctx context.Context) {
	pool, err := v.c.CatalogPoolAs(ctx, v.session(v.opts.StatementTimeout))
	if err != nil {
		v.problem(CheckFailover, -1, "", "%v", err)
		return
	}
	recs, err := catalog.ReadHostIdentities(ctx, pool)
	if err != nil {
		v.problem(CheckFailover, -1, "", "read the hosts' recorded servers: %v", err)
		return
	}
	for _, h := range v.cfg.Hosts {
		hs, rec := v.hosts[h.Name], recs[h.Name]
		if hs == nil || !hs.ok || hs.identity == nil || rec.SystemIdentifier == nil {
			continue
		}
		id := hs.identity
		switch {
		case id.SystemIdentifier != *rec.SystemIdentifier:
			v.problemFix(FixNewServer, CheckFailover, -1, h.Name, "the host's server has system identifier %s, the catalog recorded %s: another server, not a standby of the recorded one (a restore from a dump?); its counters may be behind ids the recorded server handed out",
				id.SystemIdentifier, *rec.SystemIdentifier)
		case id.InRecovery:
			v.problem(CheckFailover, -1, h.Name, "the host's DSN reaches a standby (in recovery): writes to its shards fail")
		case rec.Timeline != nil && id.Timeline > *rec.Timeline:
			v.problemFix(FixFailover, CheckFailover, -1, h.Name, "the host's server is on timeline %d, the catalog recorded %d: a standby promoted without `shardid host failover`, whose counters may be behind ids the old primary handed out and never replicated, so ids can repeat",
				id.Timeline, *rec.Timeline)
		case rec.Timeline != nil && id.Timeline < *rec.Timeline:
			v.problem(CheckFailover, -1, h.Name, "the host's server is on timeline %d, older than the %d the catalog recorded: the DSN reaches the old primary (or a copy of it) after a failover", id.Timeline, *rec.Timeline)
		}
	}
}
