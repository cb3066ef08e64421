package idgen_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shardid/shardid/idgen"
)

func ExampleLayout_Compose() {
	t := time.Date(2026, 11, 29, 14, 31, 52, 784_000_000, time.UTC)
	id, err := idgen.Default.Compose(t, 5, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(id)

	// Out-of-range fields are errors, never masked into other bits.
	_, err = idgen.Default.Compose(t, 8192, 0)
	fmt.Println(errors.Is(err, idgen.ErrShardOutOfRange))
	fmt.Println(err)
	// Output:
	// 4041150592192615424
	// true
	// idgen: shard out of range: 8192 not in 0..8191 (13 shard bits)
}

func ExampleLayout_Decompose() {
	p, err := idgen.Default.Decompose(4041150592192615424)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Time.Format(idgen.TimeFormat), p.Shard, p.Seq)

	// The same bits read in another layout mean something else.
	wide := idgen.Layout{TimeBits: 41, ShardBits: 10, SeqBits: 12}
	p, _ = wide.Decompose(4041150592192615424)
	fmt.Println(p.Time.Format(idgen.TimeFormat), p.Shard, p.Seq)
	fmt.Println(wide.MaxTime().Format(idgen.TimeFormat))
	// Output:
	// 2026-11-29T14:31:52.784Z 5 0
	// 2042-03-06T07:56:43.847Z 1 1024
	// 2081-04-30T12:54:37.272Z
}

func ExampleID_MarshalJSON() {
	type like struct {
		ID   idgen.ID `json:"id"`
		User string   `json:"user"`
	}
	b, _ := json.Marshal(like{ID: 4041150592192615424, User: "ann"})
	fmt.Println(string(b))

	// Input may be quoted or bare; a float is refused, since it may have
	// lost digits already.
	var l like
	fmt.Println(json.Unmarshal([]byte(`{"id":"4041150592192615424"}`), &l), l.ID)
	fmt.Println(json.Unmarshal([]byte(`{"id":4041150592192615424}`), &l), l.ID)
	fmt.Println(json.Unmarshal([]byte(`{"id":4.041150592192615e18}`), &l))
	// Output:
	// {"id":"4041150592192615424","user":"ann"}
	// <nil> 4041150592192615424
	// <nil> 4041150592192615424
	// idgen: not a decimal id: "4.041150592192615e18" has a fraction
}

func ExampleParse() {
	id, err := idgen.Parse("4041150592192615424")
	fmt.Println(id.Time().Format(idgen.TimeFormat), id.Shard(), id.Seq(), err)
	_, err = idgen.Parse("-4041150592192615424")
	fmt.Println(err)
	// Output:
	// 2026-11-29T14:31:52.784Z 5 0 <nil>
	// idgen: negative id: "-4041150592192615424" (ids are never negative)
}
