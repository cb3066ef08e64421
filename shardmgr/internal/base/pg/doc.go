// Package pg holds the small PostgreSQL helpers of shardmgr: connections
// and pools with the pinned session settings, SQLSTATE tests by pgerrcode
// name, literal quoting, one-line errors and lock-timeout retries.
//
// It must never import the shardmgr root or any package of ours that
// does: every part of shardmgr imports it.
package pg
