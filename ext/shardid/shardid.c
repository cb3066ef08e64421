/*
 * Prototype for measurement (ext/shardid/README.md): next_id() in C without
 * an advisory lock. Values come from nextval_internal on the CACHE 1 counter;
 * when the value drawn lags the clock, the counter is raised to the clock with
 * a compare-and-set under the sequence page's exclusive buffer lock (the lock
 * nextval_internal holds while it moves the counter), so the raise never moves
 * the counter backwards whatever other sessions draw meanwhile.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "commands/sequence.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

PG_MODULE_MAGIC;

#define SHARDID_SEQ_MAGIC 0x1717	/* sequence.c's SEQ_MAGIC */

/*
 * raise_counter moves the sequence's last value to target when it is below,
 * atomically with every concurrent nextval (both hold the page's exclusive
 * buffer lock). Returns whether it moved.
 */
static bool
raise_counter(Oid relid, int64 target)
{
	Relation	rel = relation_open(relid, RowExclusiveLock);
	Buffer		buf;
	Page		page;
	ItemId		lp;
	HeapTupleData tup;
	Form_pg_sequence_data seq;
	bool		moved = false;

	if (rel->rd_rel->relkind != RELKIND_SEQUENCE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
						errmsg("\"%s\" is not a sequence", RelationGetRelationName(rel))));
	PreventCommandIfReadOnly("shardid raise");
	PreventCommandIfParallelMode("shardid raise");
	/* As do_setval: a raise that other sessions' ids depend on is WAL-logged
	 * with an xid, so the committing transaction flushes it. */
	if (RelationNeedsWAL(rel))
		GetTopTransactionId();

	buf = ReadBuffer(rel, 0);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	if (((uint32 *) PageGetSpecialPointer(page))[0] != SHARDID_SEQ_MAGIC)
		elog(ERROR, "bad magic number in sequence \"%s\"", RelationGetRelationName(rel));
	lp = PageGetItemId(page, FirstOffsetNumber);
	Assert(ItemIdIsNormal(lp));
	tup.t_data = (HeapTupleHeader) PageGetItem(page, lp);
	tup.t_len = ItemIdGetLength(lp);
	seq = (Form_pg_sequence_data) GETSTRUCT(&tup);

	if (seq->last_value < target)
	{
		START_CRIT_SECTION();
		seq->last_value = target;
		seq->is_called = true;
		seq->log_cnt = 0;
		MarkBufferDirty(buf);
		if (RelationNeedsWAL(rel))
		{
			xl_seq_rec	xlrec;
			XLogRecPtr	recptr;

			XLogBeginInsert();
			XLogRegisterBuffer(0, buf, REGBUF_WILL_INIT);
			xlrec.node = rel->rd_node;
			XLogRegisterData((char *) &xlrec, sizeof(xl_seq_rec));
			XLogRegisterData((char *) tup.t_data, tup.t_len);
			recptr = XLogInsert(RM_SEQ_ID, XLOG_SEQ_LOG);
			PageSetLSN(page, recptr);
		}
		END_CRIT_SECTION();
		moved = true;
	}
	UnlockReleaseBuffer(buf);
	relation_close(rel, NoLock);
	return moved;
}

PG_FUNCTION_INFO_V1(shardid_next_id);

/* shardid_next_id(counter regclass, shard int, seq_bits int, shard_bits int, epoch_ms bigint, lag_ms int, counter_max bigint) */
Datum
shardid_next_id(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int64		shard = PG_GETARG_INT32(1);
	int			seqbits = PG_GETARG_INT32(2);
	int			shardbits = PG_GETARG_INT32(3);
	int64		epoch = PG_GETARG_INT64(4);
	int64		lag = PG_GETARG_INT32(5);
	int64		cmax = PG_GETARG_INT64(6);
	int64		v = nextval_internal(relid, true);
	/* ms since the Unix epoch from the wall clock, as clock_timestamp() */
	int64		now_ms = GetCurrentTimestamp() / 1000 +
		((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000);
	int64		ms = now_ms - epoch;

	if (ms > lag && v < ((ms - lag) << seqbits))
	{
		int64		target = ms << seqbits;

		if (target <= cmax)
			(void) raise_counter(relid, target);
		v = nextval_internal(relid, true);
	}
	PG_RETURN_INT64(((v >> seqbits) << (shardbits + seqbits)) | (shard << seqbits) | (v & ((INT64CONST(1) << seqbits) - 1)));
}

PG_FUNCTION_INFO_V1(shardid_next_id_here);

/*
 * Measurement only: next_id() declared directly as a C function of a shard
 * schema (no SQL wrapper to inline), finding its counter in its own schema.
 * Layout and epoch are the defaults; the shard is read from the schema name.
 * A real one needs its parameters from a place only the owner writes.
 */
typedef struct here_cache
{
	Oid			counter;
	int64		shard;
} here_cache;

Datum
shardid_next_id_here(PG_FUNCTION_ARGS)
{
	here_cache *c = (here_cache *) fcinfo->flinfo->fn_extra;
	int64		v,
				now_ms,
				ms;

	if (c == NULL)
	{
		Oid			nsp = get_func_namespace(fcinfo->flinfo->fn_oid);
		char	   *name = get_namespace_name(nsp);

		c = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(here_cache));
		c->counter = get_relname_relid("next_id_counter", nsp);
		c->shard = strtol(name + strlen("shard_"), NULL, 10);
		if (!OidIsValid(c->counter))
			elog(ERROR, "no next_id_counter in schema %s", name);
		fcinfo->flinfo->fn_extra = c;
	}
	v = nextval_internal(c->counter, true);
	now_ms = GetCurrentTimestamp() / 1000 +
		((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000);
	ms = now_ms - INT64CONST(1314220021721);
	if (ms > 1 && v < ((ms - 1) << 10))
	{
		if ((ms << 10) <= INT64CONST(1125899906842623))
			(void) raise_counter(c->counter, ms << 10);
		v = nextval_internal(c->counter, true);
	}
	PG_RETURN_INT64(((v >> 10) << 23) | (c->shard << 10) | (v & 1023));
}
