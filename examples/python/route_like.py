#!/usr/bin/env python3
"""Insert a like through a shard's DEFAULT, routing by a string key, from Python.

The recipe of docs/routing.md: hash the key (64-bit FNV-1a) to a shard, find
the shard's host in the catalog's shardid.routes view, insert in the shard's
schema (the id comes from the column DEFAULT, shard_NNNN.next_id()), and on a
fenced shard (SQLSTATE SIDFN) or a dropped schema (a move finished) read the
routes again and retry.

    SHARDID_CATALOG=postgres://... python3 route_like.py KEY USER_ID POST_ID

prints one JSON line: the key, its shard, the host, the id and its fields.
"""
import json
import os
import re
import sys
import time

import psycopg2
import psycopg2.errors
from psycopg2 import sql

FNV_OFFSET = 14695981039346656037
FNV_PRIME = 1099511628211
EPOCH_MS = 1314220021721  # the cluster's epoch_ms (this is the default)


def key_hash(key: bytes) -> int:
    """64-bit FNV-1a, as shardmgr.KeyHash (testdata/keys/golden.json)."""
    h = FNV_OFFSET
    for b in key:
        h ^= b
        h = (h * FNV_PRIME) % 2**64
    return h


def decode(id_: int) -> dict:
    """The default layout: 41 bits of milliseconds, 13 of shard, 10 of sequence."""
    return {"ms": (id_ >> 23) + EPOCH_MS, "shard_of_id": (id_ >> 10) & 8191, "seq": id_ & 1023}


def expand(dsn: str) -> str:
    """The catalog records DSNs as written in the cluster file, ${VAR}s unexpanded."""
    return re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), dsn)


def read_routes(catalog):
    with catalog.cursor() as cur:
        cur.execute("SELECT shard, host, dsn, schema_name, state FROM shardid.routes ORDER BY shard")
        return cur.fetchall()


def insert_like(catalog, key: str, user_id: int, post_id: int) -> dict:
    for attempt in range(100):
        routes = read_routes(catalog)
        shard = key_hash(key.encode()) % len(routes)
        _, host, dsn, schema, state = routes[shard]
        if state == "moving":  # the move's cut-over: a moment
            time.sleep(0.1)
            continue
        try:
            with psycopg2.connect(expand(dsn)) as conn, conn.cursor() as cur:
                cur.execute(
                    sql.SQL("INSERT INTO {}.likes (user_id, post_id) VALUES (%s, %s) RETURNING id").format(
                        sql.Identifier(schema)),
                    (user_id, post_id))
                (id_,) = cur.fetchone()
            return {"key": key, "shard": shard, "host": host, "schema": schema, "id": str(id_), **decode(id_)}
        except (psycopg2.errors.lookup("SIDFN"), psycopg2.errors.InvalidSchemaName,
                psycopg2.errors.UndefinedTable):
            time.sleep(0.1)  # fenced or moved away: read the routes again
    raise RuntimeError(f"shard of {key!r} kept moving")


def main():
    key, user_id, post_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    catalog = psycopg2.connect(expand(os.environ["SHARDID_CATALOG"]))
    catalog.autocommit = True
    try:
        print(json.dumps(insert_like(catalog, key, user_id, post_id)))
    finally:
        catalog.close()


if __name__ == "__main__":
    main()
