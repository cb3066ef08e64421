package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/internal/app/iddecode"
)

// decodeMost bounds the ids one decode request reads.
const decodeMost = 1000

// decodeView is the decoder page's data.
type decodeView struct {
	Layouts []layoutOption
	Layout  string
	Epoch   string
	Input   string
	Own     []iddecode.Parts
	Other   []idgen.Decoded
	Error   string
}

type layoutOption struct{ Name, About string }

// decodeRequest reads ?layout=L&epoch=MS and the ids (?id= repeated, or
// ?ids= separated by spaces, commas or lines) and decodes them as
// `shardid id decode` does.
func decodeRequest(r *http.Request) (layout string, own []iddecode.Parts, other []idgen.Decoded, input string, err error) {
	q := r.URL.Query()
	layout = q.Get("layout")
	if layout == "" {
		layout = iddecode.Own
	}
	input = q.Get("ids")
	ids := append(q["id"], strings.FieldsFunc(input, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' })...)
	if len(ids) == 0 {
		return layout, nil, nil, input, nil
	}
	if len(ids) > decodeMost {
		return layout, nil, nil, input, errTooMany
	}
	var epoch int64
	if e := q.Get("epoch"); e != "" {
		if epoch, err = strconv.ParseInt(e, 10, 64); err != nil {
			return layout, nil, nil, input, errEpoch
		}
	}
	if layout == iddecode.Own {
		own, err = iddecode.DecodeOwn(epoch, ids)
		return layout, own, nil, input, err
	}
	known := false
	for _, s := range idgen.Schemes() {
		known = known || s == layout
	}
	if !known {
		return layout, nil, nil, input, errLayout
	}
	other, err = iddecode.DecodeOther(layout, epoch, ids)
	return layout, nil, other, input, err
}

type decodeError string

func (e decodeError) Error() string { return string(e) }

const (
	errTooMany = decodeError("too many ids: at most 1000 at once")
	errEpoch   = decodeError("epoch: want milliseconds since 1970-01-01")
	errLayout  = decodeError("unknown layout: want one of the list")
)

func (s *Console) pageDecode(w http.ResponseWriter, r *http.Request) {
	v := &decodeView{Epoch: r.URL.Query().Get("epoch")}
	for _, name := range idgen.Schemes() {
		v.Layouts = append(v.Layouts, layoutOption{name, idgen.AboutScheme(name)})
	}
	var err error
	status := http.StatusOK
	v.Layout, v.Own, v.Other, v.Input, err = decodeRequest(r)
	if err != nil {
		v.Error = err.Error()
		status = http.StatusBadRequest
	}
	s.page(w, status, "decode.html", "decode", "id decoder", v)
}

// apiDecode is `shardid id decode [--layout L] --json`.
func (s *Console) apiDecode(w http.ResponseWriter, r *http.Request) {
	layout, own, other, _, err := decodeRequest(r)
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	case layout == iddecode.Own:
		if own == nil {
			own = []iddecode.Parts{}
		}
		writeJSON(w, http.StatusOK, own)
	default:
		if other == nil {
			other = []idgen.Decoded{}
		}
		writeJSON(w, http.StatusOK, other)
	}
}
