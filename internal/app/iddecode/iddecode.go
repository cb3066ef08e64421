// Package iddecode takes ids apart as `shardid id decode` prints them,
// for the CLI and the operator console alike, so that both serve one
// JSON shape: for the toolkit's own layout an array of
// {"id":"<decimal>","time":"...","shard":N,"seq":N}, for the other
// layouts (idgen.Schemes) an array of idgen.Decoded. Every id is read
// before anything is returned: a caller never gets half an answer.
package iddecode

import (
	"github.com/shardid/shardid/idgen"
)

// Own is the name of the toolkit's own layout among idgen.Schemes.
const Own = "instagram"

// Parts is one id of the toolkit's own layout. The id is a string in
// JSON because JavaScript numbers lose precision above 2^53.
type Parts struct {
	ID    idgen.ID `json:"id"`
	Time  string   `json:"time"`
	Shard int64    `json:"shard"`
	Seq   int64    `json:"seq"`
}

// PartsOf is p as Parts.
func PartsOf(p idgen.Parts) Parts {
	return Parts{ID: p.ID, Time: p.Time.Format(idgen.TimeFormat), Shard: p.Shard, Seq: p.Seq}
}

// DecodeOwn reads ids of the toolkit's layout with epoch (0: the default).
func DecodeOwn(epoch int64, ids []string) ([]Parts, error) {
	layout := idgen.Layout{Epoch: epoch}
	if err := layout.Validate(); err != nil {
		return nil, err
	}
	out := make([]Parts, 0, len(ids))
	for _, a := range ids {
		id, err := idgen.Parse(a)
		if err != nil {
			return nil, err
		}
		p, err := layout.Decompose(id)
		if err != nil {
			return nil, err
		}
		out = append(out, PartsOf(p))
	}
	return out, nil
}

// DecodeOther reads ids of another layout (one of idgen.Schemes but Own)
// with epoch (0: the layout's own).
func DecodeOther(scheme string, epoch int64, ids []string) ([]idgen.Decoded, error) {
	out := make([]idgen.Decoded, 0, len(ids))
	for _, a := range ids {
		d, err := idgen.Decode(scheme, a, epoch)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}
