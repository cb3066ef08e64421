package charts

import (
	"io"

	"github.com/shardid/shardid/internal/genbench"
)

// BenchSVG draws a genbench result: ids per second of each generator, and
// rows per second of the bulk INSERT into a bigserial table and with each
// generator as the id column's DEFAULT.
func BenchSVG(w io.Writer, r *genbench.Result) error {
	rate := func(name string) float64 {
		c := r.Case(name)
		if c.Median <= 0 {
			return 0
		}
		return float64(r.IDs) / c.Median.Seconds()
	}
	return WriteSVG(w,
		Panel{
			Title:  "ids per second, one session",
			YLabel: "ids per second",
			Bars: []Bar{
				{"nextval", rate(genbench.CaseNextval)},
				{"safe", rate(genbench.CaseSafe)},
				{"instagram", rate(genbench.CaseInstagram)},
			},
		},
		Panel{
			Title:  "bulk INSERT, rows per second",
			YLabel: "rows per second",
			Bars: []Bar{
				{"bigserial", rate(genbench.CaseInsertSerial)},
				{"safe DEFAULT", rate(genbench.CaseInsertSafe)},
				{"instagram DEFAULT", rate(genbench.CaseInsertInstagram)},
			},
		})
}
