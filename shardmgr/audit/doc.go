// Package audit is the log of the actions taken through the operator
// console (shardid console --actions), kept in the catalog table
// shardid.console_audit: who asked, when, what (the action and its
// parameters) and the result ("ok", ResultRunning while it runs, or the
// error line), with how long it took and the database role that wrote the
// row.
//
// The console calls Begin before an action runs and Finish when it ends,
// Record for a request it refused before any action ran, and List for its
// audit page. The rows go through the catalog package, the one writer of
// the catalog; they are not part of the map (no lock, no generation).
//
// It must never stand in the way of an action: a caller that cannot write
// its row logs that and carries on, and the action's own result stays the
// caller's. Each call is bounded by Timeout.
package audit
