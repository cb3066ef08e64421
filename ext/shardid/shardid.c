/*
 * shardid: the safe generator's next_id() in C (ext/shardid/README.md,
 * docs/uniqueness.md "The C generator").
 *
 * A shard's next_id() is declared directly as a C function of its schema,
 * with no arguments:
 *
 *   CREATE FUNCTION shard_0005.next_id() RETURNS bigint LANGUAGE c
 *     AS '$libdir/shardid', 'shardid_next_id';
 *
 * It reads its layout (shard, epoch, widths) from its own marker comment,
 * which only its owner can write, and its counter from its own schema
 * (next_id_counter, which must have the same owner), cached per backend and
 * dropped on any change to pg_proc or a relation. Values come from
 * nextval_internal on the CACHE 1 counter; when the value drawn lags the
 * clock, the counter is raised to the clock with a compare-and-set under the
 * sequence page's exclusive buffer lock, the lock nextval_internal holds
 * while it moves the counter, so a raise never moves the counter backwards
 * whatever other sessions draw meanwhile: no advisory lock on any path.
 *
 * shardid_ext.counter_raise(regclass, bigint) is the same raise for the
 * toolkit's PL/pgSQL counter movers (next_id_pull_up, next_id_advance),
 * which use it instead of setval wherever this extension is installed.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_sequence.h"
#include "commands/comment.h"
#include "commands/sequence.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

#define SHARDID_SEQ_MAGIC 0x1717	/* sequence.c's SEQ_MAGIC */
#define SHARDID_VERSION 3			/* sql.Version: the marker this reads */
#define SHARDID_VERSION_MIN 2		/* v2's marker has the same form: a C
									 * generator installed by the release
									 * before keeps working until init
									 * upgrades it */
#define SHARDID_LAG_MS 1			/* sql.Params.LagMS's default */

void		_PG_init(void);

/*
 * shardid.test_clock names a function returning "now" in ms since the Unix
 * epoch, for tests that step the clock (as sql.Params.Clock does for the
 * PL/pgSQL generator). Empty: the server's clock. Only a superuser may set
 * it (PGC_SUSET), as only a superuser may setval any counter anyway.
 */
static char *test_clock = NULL;

/* Bumped by every invalidation that may touch a cached layout. */
static uint64 cache_generation = 1;

static void
invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	cache_generation++;
}

static void
invalidate_rel(Datum arg, Oid relid)
{
	cache_generation++;
}

void
_PG_init(void)
{
	DefineCustomStringVariable("shardid.test_clock",
							   "Function giving the generator's clock in ms since the Unix epoch (tests only).",
							   "Empty means the server's clock.",
							   &test_clock, "", PGC_SUSET, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("shardid");
	CacheRegisterSyscacheCallback(PROCOID, invalidate, (Datum) 0);
	CacheRegisterRelcacheCallback(invalidate_rel, (Datum) 0);
}

/* now_ms is the clock in ms since the Unix epoch. */
static int64
now_ms(void)
{
	if (test_clock != NULL && test_clock[0] != '\0')
	{
		Oid			fn = DatumGetObjectId(DirectFunctionCall1(regprocin, CStringGetDatum(test_clock)));

		return DatumGetInt64(OidFunctionCall0(fn));
	}
	return GetCurrentTimestamp() / 1000 +
		((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000);
}

/*
 * raise_counter moves the sequence's last value to target when it is below,
 * atomically with every concurrent nextval (both hold the page's exclusive
 * buffer lock), and never past the sequence's MAXVALUE (a move's clamp lowers
 * it: fence.ClampCounter): a target beyond it is an error, as for setval, or
 * with cap the counter stops at MAXVALUE, where the next nextval reports the
 * sequence exhausted. Returns the last value after.
 */
static int64
raise_counter(Oid relid, int64 target, bool cap)
{
	Relation	rel = relation_open(relid, RowExclusiveLock);
	Buffer		buf;
	Page		page;
	ItemId		lp;
	HeapTupleData tup;
	Form_pg_sequence_data seq;
	HeapTuple	pgs;
	int64		seqmax;
	int64		last;

	if (rel->rd_rel->relkind != RELKIND_SEQUENCE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
						errmsg("\"%s\" is not a sequence", RelationGetRelationName(rel))));
	PreventCommandIfReadOnly("shardid counter raise");
	PreventCommandIfParallelMode("shardid counter raise");

	/* MAXVALUE as of the lock just taken (which processed invalidations). */
	pgs = SearchSysCache1(SEQRELID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(pgs))
		elog(ERROR, "cache lookup failed for sequence %u", relid);
	seqmax = ((Form_pg_sequence) GETSTRUCT(pgs))->seqmax;
	ReleaseSysCache(pgs);
	if (target > seqmax && !cap)
		ereport(ERROR, (errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
						errmsg("shardid counter raise: value " INT64_FORMAT " is out of bounds for sequence \"%s\" (..%s)",
							   target, RelationGetRelationName(rel), psprintf(INT64_FORMAT, seqmax))));
	if (target > seqmax)
		target = seqmax;

	/* As do_setval: a raise that later ids depend on is WAL-logged with an
	 * xid, so the committing transaction flushes it. */
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

	/* As read_seq_tuple: clear an xmax a pre-8.3 SELECT FOR UPDATE left. */
	if (HeapTupleHeaderGetRawXmax(tup.t_data) != InvalidTransactionId)
	{
		HeapTupleHeaderSetXmax(tup.t_data, InvalidTransactionId);
		tup.t_data->t_infomask &= ~HEAP_XMAX_COMMITTED;
		tup.t_data->t_infomask |= HEAP_XMAX_INVALID;
		MarkBufferDirtyHint(buf, true);
	}
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
	}
	last = seq->last_value;
	UnlockReleaseBuffer(buf);
	relation_close(rel, NoLock);
	return last;
}

PG_FUNCTION_INFO_V1(shardid_counter_raise);

/*
 * shardid_ext.counter_raise(counter regclass, target bigint) returns bigint:
 * setval(counter, target) when the counter is below target, nothing
 * otherwise, atomically with every nextval. Needs UPDATE on the counter, as
 * setval does. Returns the counter's last value after.
 */
Datum
shardid_counter_raise(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int64		target = PG_GETARG_INT64(1);

	if (pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						errmsg("permission denied for sequence %s", get_rel_name(relid))));
	PG_RETURN_INT64(raise_counter(relid, target, false));
}

/* What a shard's next_id() reads once per backend (until invalidated). */
typedef struct layout
{
	Oid			fn;				/* hash key: the function */
	uint64		generation;
	Oid			counter;
	int64		shard;
	int			seqbits;
	int			shardbits;
	int64		epoch;
	int64		counter_max;
} layout;

/* load_layout reads fn's marker comment and finds its counter. */
static void
load_layout(Oid fn, layout *l)
{
	HeapTuple	proc;
	Oid			nsp,
				owner;
	char	   *comment;
	char		variant[32];
	int			version,
				timebits,
				n;
	long long	shard,
				epoch;
	HeapTuple	rel;
	Form_pg_class relform;
	uint64		generation = cache_generation;	/* before any lookup: an
												 * invalidation meanwhile
												 * reloads next call */

	proc = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(proc))
		elog(ERROR, "cache lookup failed for function %u", fn);
	nsp = ((Form_pg_proc) GETSTRUCT(proc))->pronamespace;
	owner = ((Form_pg_proc) GETSTRUCT(proc))->proowner;
	ReleaseSysCache(proc);

	comment = GetComment(fn, ProcedureRelationId, 0);
	n = comment == NULL ? 0 :
		sscanf(comment, "shardid generator v%d variant=%31s shard=%lld epoch=%lld layout=%d/%d/%d",
			   &version, variant, &shard, &epoch, &timebits, &l->shardbits, &l->seqbits);

	/*
	 * The widths are bounded one by one before they are added (as
	 * sql.Params does), so the sum cannot overflow; once they add up to 63
	 * or 64 with time at least 2 and seq at least 1, shardbits is at most
	 * 61, and the shard's bound is shifted in int64: Params allows shard
	 * fields of 31 bits and more, where a shift of an int is undefined.
	 */
	if (n != 7 || version < SHARDID_VERSION_MIN || version > SHARDID_VERSION || strcmp(variant, "safe") != 0 ||
		l->seqbits < 1 || l->shardbits < 1 || timebits < 2 ||
		l->seqbits > 64 || l->shardbits > 64 || timebits > 64 ||
		(timebits + l->shardbits + l->seqbits != 63 && timebits + l->shardbits + l->seqbits != 64) ||
		shard < 0 || shard >= (INT64CONST(1) << l->shardbits) || epoch < 0)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("function %s.next_id() has no shardid generator v%d marker comment (found \"%s\")",
							   get_namespace_name(nsp), SHARDID_VERSION, comment ? comment : ""),
						errhint("install the generator with shardid init or the SQL of shardid sql function")));
	l->shard = (int64) shard;
	l->epoch = (int64) epoch;
	/* bit 63 stays 0: usable time bits = 63 - shard - seq */
	l->counter_max = (INT64CONST(1) << (63 - l->shardbits)) - 1;

	l->counter = get_relname_relid("next_id_counter", nsp);
	rel = OidIsValid(l->counter) ? SearchSysCache1(RELOID, ObjectIdGetDatum(l->counter)) : NULL;
	if (rel == NULL || !HeapTupleIsValid(rel))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
						errmsg("no sequence next_id_counter in schema %s", get_namespace_name(nsp))));
	relform = (Form_pg_class) GETSTRUCT(rel);
	/*
	 * Only the generator's owner chooses its counter: a relation another
	 * role made under the name is refused (docs/uniqueness.md#owners). The
	 * owner is a superuser (only one can declare a C function): its
	 * SECURITY DEFINER movers may then call counter_raise, and never fall
	 * back to a setval that this lock-free path would race.
	 */
	if (relform->relkind != RELKIND_SEQUENCE || relform->relowner != owner || !superuser_arg(owner))
	{
		ReleaseSysCache(rel);
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("%s.next_id_counter is not a sequence owned by the owner of %s.next_id(), a superuser",
							   get_namespace_name(nsp), get_namespace_name(nsp))));
	}
	ReleaseSysCache(rel);
	l->generation = generation;
}

/*
 * The backend's layouts by function: a statement's FmgrInfo lives as long
 * as the statement, and reading the marker comment (an index scan of
 * pg_description) for every single-row INSERT would cost more than the id.
 * Entries are never removed, only reloaded, so fn_extra may point at one.
 */
static HTAB *layouts = NULL;

static layout *
layout_of(FunctionCallInfo fcinfo)
{
	layout	   *l = (layout *) fcinfo->flinfo->fn_extra;
	bool		found;

	if (l == NULL)
	{
		if (layouts == NULL)
		{
			HASHCTL		ctl;

			ctl.keysize = sizeof(Oid);
			ctl.entrysize = sizeof(layout);
			layouts = hash_create("shardid layouts", 16, &ctl, HASH_ELEM | HASH_BLOBS);
		}
		l = hash_search(layouts, &fcinfo->flinfo->fn_oid, HASH_ENTER, &found);
		if (!found)
			l->generation = 0;
		fcinfo->flinfo->fn_extra = l;
	}
	if (l->generation != cache_generation)
	{
		l->generation = 0;		/* a failed load leaves it stale */
		load_layout(fcinfo->flinfo->fn_oid, l);
	}
	return l;
}

PG_FUNCTION_INFO_V1(shardid_next_id);

/* A shard's next_id(): see the comment at the top. */
Datum
shardid_next_id(PG_FUNCTION_ARGS)
{
	layout	   *l = layout_of(fcinfo);
	int64		v,
				ms;

	/*
	 * nextval_internal checks USAGE or UPDATE on the counter, as nextval
	 * does: the caller may draw from it.
	 */
	v = nextval_internal(l->counter, true);

	/*
	 * Past the layout's last ms the clock is held one ms beyond it, where
	 * no raise is possible (target > counter_max): every shift by seqbits
	 * below stays within int64, whatever the clock says.
	 */
	ms = Min(now_ms() - l->epoch, (l->counter_max >> l->seqbits) + 1);
	if (ms > SHARDID_LAG_MS && v < ((ms - SHARDID_LAG_MS) << l->seqbits))
	{
		int64		target = ms << l->seqbits;

		/*
		 * No ACL check of its own here, unlike counter_raise (UPDATE, as
		 * setval): nothing in this raise is the caller's to choose. The
		 * counter is the one the owner's marker and schema name, the
		 * target is the server's clock (test_clock is a superuser's
		 * setting), and the raise only moves the counter forward to it,
		 * never past counter_max: what a caller who may nextval the
		 * counter reaches anyway by drawing, and what the PL/pgSQL
		 * generator's next_id_pull_up, granted to PUBLIC for the same
		 * reason, does.
		 */
		if (target <= l->counter_max)
			(void) raise_counter(l->counter, target, true);
		v = nextval_internal(l->counter, true);
	}
	PG_RETURN_INT64(((v >> l->seqbits) << (l->shardbits + l->seqbits)) |
					(l->shard << l->seqbits) |
					(v & ((INT64CONST(1) << l->seqbits) - 1)));
}
