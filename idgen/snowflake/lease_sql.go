package snowflake

// The lease table's SQL. Every acquisition and renewal locks the
// datacenter's marks row first, then a lease row, so they cannot
// deadlock; the marks row also serialises acquisitions, so two processes
// never race for one worker.
const (
	// ensureMarksSQL creates the datacenter's marks row and locks it.
	ensureMarksSQL = `
INSERT INTO shardid.snowflake_lease_marks AS m (datacenter) VALUES ($1)
ON CONFLICT (datacenter) DO UPDATE SET max_worker = m.max_worker
RETURNING max_worker, used_until_ms`
	// pickSQL finds the best worker to take: one with no live lease whose
	// last possible time ($3 now, Unix ms) is behind this clock, lowest
	// first; failing that, the one that frees soonest. A worker with no row
	// at or below max_worker ($4) may have had a row someone deleted: its
	// last possible time is the datacenter's newest promise ($5).
	pickSQL = `
SELECT w, COALESCE(l.used_until_ms, CASE WHEN w > $4 THEN 0 ELSE $5::bigint END) AS prev
FROM generate_series(0, $2::int) w
LEFT JOIN shardid.snowflake_leases l ON l.datacenter = $1 AND l.worker = w
WHERE l.worker IS NULL OR l.expires_at < now()
ORDER BY GREATEST(COALESCE(l.used_until_ms, CASE WHEN w > $4 THEN 0 ELSE $5::bigint END), $3::bigint), w
LIMIT 1`
	// takeSQL leases worker $2: a new row, or an expired one (a holder
	// that renewed meanwhile keeps it: no row comes back).
	takeSQL = `
INSERT INTO shardid.snowflake_leases AS l (datacenter, worker, token, holder, expires_at, used_until_ms)
VALUES ($1, $2, nextval('shardid.snowflake_lease_tokens'), $3, now() + $4 * interval '1 millisecond', $5)
ON CONFLICT (datacenter, worker) DO UPDATE
SET token = EXCLUDED.token, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
    used_until_ms = GREATEST(l.used_until_ms, EXCLUDED.used_until_ms), acquired_at = now()
WHERE l.expires_at < now()
RETURNING token`
	// markSQL raises the datacenter's marks to cover worker $2 and the
	// promise $3; it creates the row if someone deleted it.
	markSQL = `
INSERT INTO shardid.snowflake_lease_marks AS m (datacenter, max_worker, used_until_ms) VALUES ($1, $2, $3)
ON CONFLICT (datacenter) DO UPDATE
SET max_worker = GREATEST(m.max_worker, EXCLUDED.max_worker), used_until_ms = GREATEST(m.used_until_ms, EXCLUDED.used_until_ms)`
	// renewSQL renews while the token is ours, even past expires_at: a
	// lease that expired but was not taken still has our token, and nobody
	// else has used the worker. No row back: the lease is gone.
	renewSQL = `
UPDATE shardid.snowflake_leases
SET expires_at = now() + $4 * interval '1 millisecond', used_until_ms = GREATEST(used_until_ms, $5)
WHERE datacenter = $1 AND worker = $2 AND token = $3
RETURNING token`
	// releaseSQL expires the lease now and records the last time actually
	// used, so the next holder need not wait for the promise.
	releaseSQL = `
UPDATE shardid.snowflake_leases SET expires_at = now(), used_until_ms = $4
WHERE datacenter = $1 AND worker = $2 AND token = $3
RETURNING token`
)
