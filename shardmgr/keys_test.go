package shardmgr_test

import (
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// The golden vectors pin where string and byte keys live: a change to the
// hash would strand every row already written under it.
func TestKeyMappingGolden(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(clustertest.Testdata("keys", "golden.json"))
	require.NoError(t, err)
	var vecs []struct {
		Key    *string        `json:"key"`
		KeyHex string         `json:"key_hex"`
		Hash   string         `json:"fnv1a64"`
		Shard  map[string]int `json:"shard"`
	}
	require.NoError(t, json.Unmarshal(data, &vecs))
	require.GreaterOrEqual(t, len(vecs), 8)
	for _, v := range vecs {
		b, err := hex.DecodeString(v.KeyHex)
		require.NoError(t, err)
		want, err := strconv.ParseUint(v.Hash, 10, 64)
		require.NoError(t, err)
		require.Equal(t, want, shardmgr.KeyHash(b), "key %x", b)

		std := fnv.New64a() // the algorithm the doc comment names
		std.Write(b)
		require.Equal(t, std.Sum64(), shardmgr.KeyHash(b), "key %x", b)

		require.NotEmpty(t, v.Shard)
		for n, shard := range v.Shard {
			shards, err := strconv.Atoi(n)
			require.NoError(t, err)
			r := shardmgr.RouterWithShards(shards)
			require.Equal(t, shard, r.ShardForBytes(b), "key %x on %d shards", b, shards)
			if v.Key != nil {
				require.Equal(t, string(b), *v.Key)
				require.Equal(t, shard, r.ShardForString(*v.Key), "key %q on %d shards", *v.Key, shards)
			}
		}
	}
}

// Not parallel: AllocsPerRun refuses parallel tests.
func TestShardForStringEqualsBytesAndSpreads(t *testing.T) {
	r := shardmgr.RouterWithShards(64)
	seen := map[int]int{}
	for i := range 6400 {
		k := "user-" + strconv.Itoa(i)
		s := r.ShardForString(k)
		require.Equal(t, s, r.ShardForBytes([]byte(k)))
		require.True(t, s >= 0 && s < 64)
		seen[s]++
	}
	require.Len(t, seen, 64, "every shard gets keys")
	for s, n := range seen {
		require.Greater(t, n, 50, "shard %d gets %d of 6400 keys", s, n) // 100 expected
	}
	require.Zero(t, testing.AllocsPerRun(100, func() { r.ShardForString("user@example.com") }))
}

// What a string key costs over an integer key, side by side.
func BenchmarkShardFor(b *testing.B) {
	r := shardmgr.RouterWithShards(8192)
	email := "alice.example@example.com" // 25 bytes
	token := []byte("0b8f5c1e7f414a6e")
	b.Run("key", func(b *testing.B) {
		for b.Loop() {
			r.ShardForKey(31337)
		}
	})
	b.Run("string-25B", func(b *testing.B) {
		for b.Loop() {
			r.ShardForString(email)
		}
	})
	b.Run("bytes-16B", func(b *testing.B) {
		for b.Loop() {
			r.ShardForBytes(token)
		}
	})
}
