// Package idgen is the shardid id layout in Go: it builds, takes apart,
// reads and writes the sharded, time-sortable 64-bit ids that the
// PostgreSQL generators (package sql) hand out.
//
// # The layout
//
// An id is a non-negative int64 (a PostgreSQL bigint). By default, following
// Instagram's scheme, its bits are, from the top:
//
//	 1 bit   always 0, so ids are never negative and sort the same everywhere
//	41 bits  milliseconds since the epoch (2011-08-24T21:07:01.721Z)
//	13 bits  logical shard, 0..8191
//	10 bits  sequence within the shard and millisecond, 0..1023
//
// Instagram's 41/13/10 adds up to 64, so the top time bit is the sign bit:
// 40 bits of time are usable and the last id is made on 2046-06-27. A
// Layout may choose other widths and another epoch, for example 41/10/12
// (widths adding up to 63, all 41 time bits usable, until 2081-04-30).
// The widths must be positive and add up to 63 or 64; in every case bit 63
// stays 0 and a layout has 63 - ShardBits - SeqBits usable time bits. The SQL
// generators follow the same rule, so both sides agree on every id.
//
// The zero Layout is the default, and zero fields mean their defaults: an
// Epoch of 0 is DefaultEpoch, and widths that are all 0 are 41/13/10.
//
// # Building and reading ids
//
// Layout.Compose builds an id from a time, a shard and a sequence number,
// and Layout.Decompose takes one apart into Parts. Nothing is ever silently
// truncated: a shard or sequence out of range, a time before the epoch or
// after Layout.MaxTime, or a negative id is an error wrapping one of the
// sentinels (ErrShardOutOfRange, ErrSeqOutOfRange, ErrBeforeEpoch,
// ErrAfterMaxTime, ErrNegativeID, ErrInvalidLayout), so callers can test
// with errors.Is and users get one line that names the bad value.
//
// The ID methods Time, Shard and Seq read an id in the default layout.
//
// # Text and JSON
//
// An ID is written as a decimal string, in text and in JSON ("123"):
// JavaScript numbers are exact only up to 2^53, and ids made today are near
// 2^62. On input, JSON may carry the id quoted or bare; fractions, exponents,
// signs and values above 2^63-1 are refused, because an id that passed
// through a floating-point number may already have lost its last digits.
// Parse reads the same decimal form from a command line or a URL.
//
// idgen imports nothing else of shardid's.
package idgen
