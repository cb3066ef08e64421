package catalog

// Phase is the last step a move completed, as the move journal
// (shardid.moves.phase) records it. Package rebalance, which runs moves,
// and this package, which reads the journal for verify, status and init,
// share these names; rebalance.Phase is this type.
type Phase string

// Phases of a move. An online move goes planned, schema, copy, catchup,
// fenced, verified, flipped, cleaned; an offline one planned, schema,
// fenced, copy, verified, flipped, cleaned. Aborted ends a move that was
// rolled back before its flip.
const (
	PhasePlanned  Phase = "planned"  // journaled, nothing done
	PhaseSchema   Phase = "schema"   // the target holds the schema at the source's version, fenced and empty
	PhaseCopy     Phase = "copy"     // online: publication and subscription made; offline: rows copied
	PhaseCatchup  Phase = "catchup"  // online: initial copy done, following changes closely
	PhaseFenced   Phase = "fenced"   // the shard is moving in the catalog and the source refuses writes
	PhaseVerified Phase = "verified" // the target has every row, counts and checksums agree, counter carried
	PhaseFlipped  Phase = "flipped"  // the catalog places the shard on the target, which takes writes
	PhaseCleaned  Phase = "cleaned"  // replication objects gone, the source copy retired
	PhaseAborted  Phase = "aborted"  // rolled back; the source serves as before
)

// PointOfNoReturn is the phase from which a move cannot be undone, only
// finished: the catalog names the target as the shard's home (the flip),
// writers may have written there, and abort refuses (the same in every
// mode: the phase tables of package rebalance put it after verified and
// before cleaned). This is the one place that says so.
const PointOfNoReturn = PhaseFlipped

// PastNoReturn reports whether a move in phase p has reached the point of
// no return (flipped, or cleaned after it).
func (p Phase) PastNoReturn() bool { return p == PointOfNoReturn || p == PhaseCleaned }

// Open reports whether a move in phase p still has work to do.
func (p Phase) Open() bool { return p != PhaseCleaned && p != PhaseAborted }

// OpenMoves is the SQL predicate on shardid.moves of an unfinished move:
// the one the catalog's moves_open_shard_idx enforces one of per shard.
const OpenMoves = `phase NOT IN ('` + string(PhaseCleaned) + `', '` + string(PhaseAborted) + `')`

// PastNoReturnMoves is the SQL predicate on shardid.moves of a move that
// reached the point of no return but is not finished.
const PastNoReturnMoves = `phase = '` + string(PointOfNoReturn) + `'`
