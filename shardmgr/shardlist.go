package shardmgr

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseShardList reads a list of logical shards as operators write it on
// the command line: ids and inclusive ranges separated by commas,
// "5,7,10-20". It returns the ids ascending, each once. Every id must be
// in 0..MaxShards-1; whether the cluster has it is for Config.CheckShard.
// An empty list, an empty element, a range whose end is below its start
// and anything that is not a decimal number is an error wrapping
// ErrShardList that names the element.
func ParseShardList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty (want ids and ranges such as 5,7,10-20)", ErrShardList)
	}
	// A set rather than a slice: "0-8191" repeated must not grow memory.
	var in [MaxShards]bool
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseShardID(lo, part)
		if err != nil {
			return nil, err
		}
		last := first
		if isRange {
			if last, err = parseShardID(hi, part); err != nil {
				return nil, err
			}
			if last < first {
				return nil, fmt.Errorf("%w: %s: the range ends below its start", ErrShardList, quoteInput(part))
			}
		}
		for id := first; id <= last; id++ {
			in[id] = true
		}
	}
	var out []int
	for id, ok := range in {
		if ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// parseShardID reads one end of an element of a shard list.
func parseShardID(s, part string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %s (want ids and ranges such as 5,7,10-20)", ErrShardList, quoteInput(part))
	}
	id, err := strconv.Atoi(s)
	if err != nil || id >= MaxShards {
		return 0, fmt.Errorf("%w: %s: shards are 0..%d", ErrShardList, quoteInput(part), MaxShards-1)
	}
	return id, nil
}

// FormatShardList writes ascending shard ids as ParseShardList reads them,
// consecutive ids as ranges: 0-3,7,9-10.
func FormatShardList(ids []int) string {
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		} else {
			parts = append(parts, strconv.Itoa(ids[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
