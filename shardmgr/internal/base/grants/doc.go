// Package grants reads what a shard schema carries besides its rows that
// the users of the shard rely on — owners, privileges (ACLs of the schema,
// its tables and their columns, sequences, routines and types, grants to
// PUBLIC included), default privileges set in the schema, row-level
// security and its policies, the triggers users made, comments — and makes
// another copy of the schema carry the same (a move's target), or names
// where two copies differ (verify).
//
// Objects are named relative to their schema, so that copies under other
// names (a retired copy, shard_NNNN_moved_gG) compare. Objects the
// toolkit makes in every shard (its generator, counter, fence and
// bookkeeping, listed by the caller) keep the owner the toolkit gave them
// on each host and their grants to PUBLIC as the toolkit set them: a copy
// never widens what PUBLIC may do with the toolkit's objects.
//
// It must never write to a schema other than the one it is asked to
// build, never grant PUBLIC on a toolkit object, and never let a name it
// read reach SQL unquoted.
package grants
