// Package console is the operator console that `shardid console` serves:
// the cluster on one web page, for a team to keep open during a
// rebalance. It is a thin reader of the cluster handle (shardmgr/cluster):
// every page and JSON endpoint is built from the values the CLI's --json
// prints (install.Status, rebalance.MoveList, verify.Report,
// migrate.MigrationStatus, iddecode), so the console adds no second
// truth. Its pages are server-rendered HTML with a little plain
// JavaScript, all embedded in the binary: no CDN, nothing downloaded,
// works offline.
//
// Pages: the map (hosts as rows, the shard space as a strip per host),
// the moves (the journal, refreshed while a rebalance runs), the checks
// (verify run from a button, its result streamed; migrations per
// version), an id decoder, the ID service's metrics when a serve URL
// is given, and the audit log: the actions taken through the console, as
// the catalog keeps them (shardid.console_audit, package shardmgr/audit;
// who from Options.UserHeader, else the client's address).
//
// It must never change the cluster unless built with Options.Actions and
// asked with the token and a confirmation: without them no page carries a
// control that changes state and the action endpoints answer 403. It must
// never let its audit log change an action's answer: a row it cannot
// write is logged and said (audit_error), the action's status and result
// stay its own. It must never show a password: DSNs are shown as the
// catalog records them (shardmgr.Host.CatalogDSN). Bound to loopback, it
// refuses requests whose Host header is not a loopback name (DNS
// rebinding) and POSTs from another origin.
package console
