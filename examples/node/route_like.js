// Insert a like through a shard's DEFAULT, routing by a string key, from Node.
//
// The recipe of docs/routing.md: hash the key (64-bit FNV-1a) to a shard,
// find the shard's host in the catalog's shardid.routes view, insert in the
// shard's schema (the id comes from the column DEFAULT,
// shard_NNNN.next_id()), and on a fenced shard (SQLSTATE SIDFN) or a dropped
// schema (a move finished) read the routes again and retry. node-postgres
// returns int8 as a string: ids are read with BigInt, never Number (which
// loses bits past 2^53).
//
//   SHARDID_CATALOG=postgres://... node route_like.js KEY USER_ID POST_ID
//
// prints one JSON line: the key, its shard, the host, the id and its fields.
'use strict';
const { Client } = require('pg');

const FNV_OFFSET = 14695981039346656037n;
const FNV_PRIME = 1099511628211n;
const MASK64 = (1n << 64n) - 1n;
const EPOCH_MS = 1314220021721n; // the cluster's epoch_ms (this is the default)

// 64-bit FNV-1a, as shardmgr.KeyHash (testdata/keys/golden.json).
function keyHash(bytes) {
  let h = FNV_OFFSET;
  for (const b of bytes) {
    h ^= BigInt(b);
    h = (h * FNV_PRIME) & MASK64;
  }
  return h;
}

// The default layout: 41 bits of milliseconds, 13 of shard, 10 of sequence.
function decode(id) {
  return { ms: Number((id >> 23n) + EPOCH_MS), shard_of_id: Number((id >> 10n) & 8191n), seq: Number(id & 1023n) };
}

// The catalog records DSNs as written in the cluster file, ${VAR}s unexpanded.
const expand = (dsn) => dsn.replace(/\$\{(\w+)\}/g, (_, v) => process.env[v] || '');

const quoteIdent = (s) => '"' + s.replace(/"/g, '""') + '"';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RETRY = new Set(['SIDFN', '3F000', '42P01']); // fenced, schema gone, table gone

async function insertLike(catalog, key, userId, postId) {
  for (let attempt = 0; attempt < 100; attempt++) {
    const { rows } = await catalog.query('SELECT shard, host, dsn, schema_name, state FROM shardid.routes ORDER BY shard');
    const shard = Number(keyHash(Buffer.from(key, 'utf8')) % BigInt(rows.length));
    const r = rows[shard];
    if (r.state === 'moving') { await sleep(100); continue; }
    const conn = new Client({ connectionString: expand(r.dsn) });
    await conn.connect();
    try {
      const res = await conn.query(`INSERT INTO ${quoteIdent(r.schema_name)}.likes (user_id, post_id) VALUES ($1, $2) RETURNING id`, [userId, postId]);
      const id = BigInt(res.rows[0].id);
      return { key, shard, host: r.host, schema: r.schema_name, id: id.toString(), ...decode(id) };
    } catch (e) {
      if (!RETRY.has(e.code)) throw e;
      await sleep(100);
    } finally {
      await conn.end();
    }
  }
  throw new Error(`shard of ${key} kept moving`);
}

async function main() {
  const [key, userId, postId] = process.argv.slice(2);
  const catalog = new Client({ connectionString: expand(process.env.SHARDID_CATALOG) });
  await catalog.connect();
  try {
    console.log(JSON.stringify(await insertLike(catalog, key, userId, postId)));
  } finally {
    await catalog.end();
  }
}

main().catch((e) => { console.error(e.message); process.exit(1); });
