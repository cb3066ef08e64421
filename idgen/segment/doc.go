// Package segment is a number-range ("segment") allocator for business
// document ids: orders, payments, ledger entries.
//
// Each business tag takes whole ranges of numbers from one of several
// PostgreSQL databases (the sources) in a single round trip and hands them
// out from memory. The next range is loaded in the background before the
// current one runs out, and the range size adapts to the rate. With N
// sources, source i only ever hands out numbers congruent to i modulo N,
// so the sources can never collide and any one of them can be down.
package segment
