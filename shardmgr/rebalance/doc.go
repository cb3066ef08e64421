// Package rebalance moves whole logical shards between hosts: it plans a
// balance (PlanRebalance), runs the plan (Apply) or one move (MoveShard),
// lists the moves' journal (Moves), rolls an unfinished move back
// (AbortMove) and drops moved shards' retired copies (Cleanup).
//
// A move is a table of phases per mode (phases in move_phases.go): the
// target's schema is built, the rows copied (online: with COPY at the
// snapshot of a logical replication slot, then the changes since streamed
// by a subscription; offline: with COPY under the fence), the source
// fenced for a short cut-over, the
// copy checked table by table, the counter carried over so no id repeats,
// the catalog flipped (the move's point of no return) and only then the
// target opened. Every phase is recorded in the catalog's
// journal, so a move resumes where it stopped. Apply runs the online moves
// from one source to one target as a batch sharing one slot and
// subscription (apply_batch.go); every wait on the target's replication
// is bounded (WorkerStartTimeout, CatchupTimeout).
//
// It must never leave two writable copies of a shard, never let a copy the
// catalog does not name take a write, never fence or stop the counter of
// the copy the catalog names, never flip a copy whose rows or checksums
// differ from the source's, never wait for a lock without a bound, and
// never register hosts or run init without saying so in its result.
package rebalance
