package pgsession

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// The toolkit's own sessions (moves, init, migrations' bookkeeping,
// verify, the console, serve's direct sessions) do long work: a COPY of a
// large shard, an index build, a catch-up, the install of many shards, a
// migration. A managed server often sets statement_timeout (30 s, say),
// idle_in_transaction_session_timeout and, on PostgreSQL 17+,
// transaction_timeout at the server, database or role level; inherited,
// they end that work half way with PostgreSQL's message and nothing to
// change. OwnTimeouts makes a session set its own instead: the settings
// travel in the startup packet (which takes precedence over ALTER
// SYSTEM, ALTER DATABASE and ALTER ROLE ... SET) except
// transaction_timeout, which PostgreSQL before 17 does not know (a
// startup parameter would refuse the connection there): it is set right
// after connecting, on 17+ only. The toolkit bounds its waits itself
// (contexts, lock_timeout where it takes a lock, its own documented
// statement bounds), so none of these is left to the server's defaults.
//
// A pooled DSN (an application's app_dsn) must not get these: a
// transaction-mode pooler refuses or loses startup parameters, and
// session settings there leak to other clients. The operator DSNs the
// toolkit's own sessions use are PostgreSQL itself (poolers are refused
// there).

// ownTimeouts are the startup parameters OwnTimeouts sets where the DSN
// or the caller has not: off for the toolkit's own sessions.
var ownTimeouts = []string{"statement_timeout", "idle_in_transaction_session_timeout"}

// TransactionTimeoutMajor is the first major that knows transaction_timeout.
const TransactionTimeoutMajor = 17

// OwnTimeouts makes cfg's sessions run with statement_timeout and
// idle_in_transaction_session_timeout off, and transaction_timeout off on
// PostgreSQL 17+, whatever the server, database or role sets, unless cfg
// already sets them (a DSN's statement_timeout, a caller's own bound).
// Applying it twice costs one more SET on 17+.
func OwnTimeouts(cfg *pgconn.Config) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for _, k := range ownTimeouts {
		if _, ok := cfg.RuntimeParams[k]; !ok {
			cfg.RuntimeParams[k] = "0"
		}
	}
	if _, ok := cfg.RuntimeParams["transaction_timeout"]; ok {
		return
	}
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		if prev != nil {
			if err := prev(ctx, pc); err != nil {
				return err
			}
		}
		if ServerMajor(pc) < TransactionTimeoutMajor {
			return nil
		}
		if _, err := pc.Exec(ctx, `SET transaction_timeout = 0`).ReadAll(); err != nil {
			return fmt.Errorf("turn transaction_timeout off for the toolkit's session (the role must be allowed to set it): %w", err)
		}
		return nil
	}
}

// ResetAll is the SQL that resets a session's settings (RESET ALL, as a
// migration step's bookkeeping does after the user's SQL) and keeps the
// timeouts OwnTimeouts gave it: RESET ALL goes back to the startup
// parameters' values (statement_timeout and
// idle_in_transaction_session_timeout stay off) but to the server's or
// database's transaction_timeout, which OwnTimeouts turned off with SET,
// on 17+: it is turned off again there, unless the session's DSN set it
// itself (RESET ALL keeps that one).
func ResetAll(pc *pgconn.PgConn, cfg *pgconn.Config) string {
	if ServerMajor(pc) < TransactionTimeoutMajor {
		return "RESET ALL"
	}
	if _, ok := cfg.RuntimeParams["transaction_timeout"]; ok {
		return "RESET ALL"
	}
	return "RESET ALL; SET transaction_timeout = 0"
}

// ServerMajor is the major version of the server pc is connected to, from
// its server_version parameter ("15.4 (Debian ...)", "18beta1"); 0 when
// it cannot be read.
func ServerMajor(pc *pgconn.PgConn) int {
	v := pc.ParameterStatus("server_version")
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

// TimeoutSetting names the server timeout that ended err's statement or
// session: "statement_timeout", "lock_timeout",
// "idle_in_transaction_session_timeout" or "transaction_timeout"; "" when
// err is none of these. PostgreSQL's own message names the timeout but
// not the setting to change.
func TimeoutSetting(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return ""
	}
	switch {
	case pe.Code == pgerrcode.QueryCanceled && strings.Contains(pe.Message, "statement timeout"):
		return "statement_timeout"
	case pe.Code == pgerrcode.LockNotAvailable && strings.Contains(pe.Message, "lock timeout"):
		return "lock_timeout"
	case pe.Code == pgerrcode.IdleInTransactionSessionTimeout:
		return "idle_in_transaction_session_timeout"
	case pe.Code == "25P04": // transaction_timeout, PostgreSQL 17+
		return "transaction_timeout"
	}
	return ""
}
