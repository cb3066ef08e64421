package segment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/migrations"
)

// drain takes ids until the allocator refuses, returning them and the error.
func drain(t *testing.T, tag *segment.Tag) ([]int64, error) {
	t.Helper()
	var ids []int64
	for range 1_000_000 {
		id, err := tag.Next(ctxT(t))
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	t.Fatal("the allocator never ran dry")
	return nil, nil
}

func TestAddSourceWithRelayout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	old := &fixture{dsns: f.dsns[:2], pools: f.pools[:2]}
	tags := map[string]segment.TagConfig{"order": {MinStep: 100, MaxStep: 100}}
	a := old.open(t, tags)
	all := make([]int64, 1000)
	_, err := a.Tag("order").Fill(ctxT(t), all)
	require.NoError(t, err)

	// The new database gets the migrations, then the layout moves to 3.
	require.NoError(t, migrations.Up(ctxT(t), f.dsns[2], migrations.Segment))
	res, err := segment.Relayout(ctxT(t), f.pools, nil)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, "order", res[0].Tag)
	require.Zero(t, res[0].Base%3)
	require.GreaterOrEqual(t, res[0].Base, res[0].Highest)

	// The old allocator hands out what it holds, then refuses the new rows.
	rest, err := drain(t, a.Tag("order"))
	require.ErrorIs(t, err, segment.ErrUnavailable)
	var le *segment.LayoutError
	require.ErrorAs(t, err, &le)
	require.Equal(t, 3, le.GotStride)
	all = append(all, rest...)
	for _, id := range all {
		require.LessOrEqual(t, id, res[0].Highest)
	}

	b := f.open(t, tags)
	fresh := make([]int64, 2000)
	_, err = b.Tag("order").Fill(ctxT(t), fresh)
	require.NoError(t, err)
	residues := map[int64]bool{}
	for _, id := range fresh {
		require.Greater(t, id, res[0].Highest)
		residues[id%3] = true
	}
	require.Len(t, residues, 3, "all three sources serve")
	requireUnique(t, append(all, fresh...))

	// Running it again (say, after it stopped half way) is safe.
	res2, err := segment.Relayout(ctxT(t), f.pools, []string{"order"})
	require.NoError(t, err)
	require.Greater(t, res2[0].Base, res[0].Base)
}

func TestAppendedSourceStartsAboveTheOthers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	old := &fixture{dsns: f.dsns[:2], pools: f.pools[:2]}
	tags := map[string]segment.TagConfig{"order": {MinStep: 100, MaxStep: 100}}
	a := old.open(t, tags)
	before := make([]int64, 1000)
	_, err := a.Tag("order").Fill(ctxT(t), before)
	require.NoError(t, err)
	a.Close()

	// Appended without Relayout: the old rows refuse the new stride, and
	// the new source creates its row above everything the others reserved.
	b := f.open(t, tags)
	after := make([]int64, 500)
	_, err = b.Tag("order").Fill(ctxT(t), after)
	require.NoError(t, err)
	highest := max(f.maxID(t, 0, "order"), f.maxID(t, 1, "order"))
	for _, id := range after {
		require.Equal(t, int64(2), id%3)
		require.Greater(t, id, highest)
	}
	requireUnique(t, append(before, after...))
}
