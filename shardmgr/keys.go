package shardmgr

// Keys that are not integers map to shards through a hash. The hash is
// part of where the data lives: rows written under one mapping are found
// only under the same mapping, so it is fixed for good. It is FNV-1a 64
// (the algorithm of the standard library's hash/fnv New64a), spelled out
// here so that no library update can change it and other languages can
// reproduce it; testdata/keys/golden.json pins it.
const (
	fnv64aOffset = 14695981039346656037
	fnv64aPrime  = 1099511628211
)

// KeyHash is the 64-bit FNV-1a hash of b: start from 14695981039346656037,
// and for each byte XOR it in, then multiply by 1099511628211 (mod 2^64).
// ShardForBytes and ShardForString place a key on shard KeyHash(key) mod
// shards. The mapping never changes: it decides where rows live.
func KeyHash(b []byte) uint64 {
	h := uint64(fnv64aOffset)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnv64aPrime
	}
	return h
}

// keyHashString is KeyHash of s's bytes without copying them.
func keyHashString(s string) uint64 {
	h := uint64(fnv64aOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnv64aPrime
	}
	return h
}

// ShardForBytes maps a byte key (a UUID's 16 bytes, a hash, an opaque
// token) to its logical shard: KeyHash(b) mod shards, KeyHash being
// 64-bit FNV-1a. This mapping is part of the data's placement and never
// changes between releases; moving a shard moves its keys with it.
func (r *Router) ShardForBytes(b []byte) int {
	return int(KeyHash(b) % uint64(r.Shards()))
}

// ShardForString maps a string key (an email, a tenant name, a UUID in its
// text form) to its logical shard: the 64-bit FNV-1a hash of the string's
// bytes, exactly as written (no case folding or Unicode normalisation:
// normalise first if two spellings must meet), mod shards. It equals
// ShardForBytes([]byte(s)). This mapping is part of the data's placement
// and never changes between releases.
func (r *Router) ShardForString(s string) int {
	return int(keyHashString(s) % uint64(r.Shards()))
}
