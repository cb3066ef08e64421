// Package rebalance moves whole logical shards between hosts: it plans a
// balance (PlanRebalance), runs the plan (Apply) or one move (MoveShard),
// lists the moves' journal (Moves), rolls an unfinished move back
// (AbortMove) and drops moved shards' retired copies (Cleanup).
//
// A move is a table of phases per mode (phases in move_phases.go, the
// loop in move.go, the journal in move_journal.go, abort in
// move_abort.go); each phase's work sits in files named for it:
//
//   - copy: copy_target.go (the target's schema at the source's version;
//     the offline COPY), copy_snapshot.go (online: COPY at the slot's
//     snapshot, indexes after), copy_tables.go (which tables a move can
//     carry), copy_grants.go (the shard's privileges);
//   - fence and cut-over: cutover.go (prepare, fence, flip, open the
//     target), cutover_delta.go (what changed since the pre-fence scan),
//     cutover_verify.go (counts and checksums), cutover_counter.go (the
//     generator's counter carried over);
//   - replication objects: replication.go (slot, publication,
//     subscription, catch-up), replication_batch.go (one subscription for
//     the moves a batch shares).
//
// The point of no return is named once, PointOfNoReturn (the flip): the
// phase tables place it and every decision asks Phase.PastNoReturn.
//
// In order: the
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
// never register or change hosts (init does; a move refuses a cluster
// file the catalog does not agree with: ErrHostsNotApplied).
package rebalance
