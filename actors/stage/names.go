package stage

import (
	"fmt"
	"sort"
	"strings"

	"strata/messages"
)

// ShardID is the actor name of a shard: stable, so every node names the
// same shard the same way. A tensor-parallel member's names its place in
// the group and (hashed) the group.
func ShardID(s *messages.ShardSpec) string {
	if len(s.TpNodes) > 0 && len(s.TpWeights) == len(s.TpNodes) {
		h := tpStageID(s)
		return fmt.Sprintf("%s@%d-%d~tp%dof%d-%x", s.Model, s.First, s.End, s.TpIndex, len(s.TpNodes), h[:6])
	}
	return fmt.Sprintf("%s@%d-%d", s.Model, s.First, s.End)
}

// ShardList renders the host's shards for NodeInfo.shards: "MODEL:FIRST-END"
// (layers [FIRST, END)), with "@tpI/N" for member I of a tensor-parallel
// group of N; ParseShard reads them back.
func ShardList(specs []*messages.ShardSpec) []string {
	var out []string
	for _, s := range specs {
		tp := ""
		if len(s.TpNodes) > 0 {
			tp = fmt.Sprintf("@tp%d/%d", s.TpIndex, len(s.TpNodes))
		}
		out = append(out, fmt.Sprintf("%s:%d-%d%s", s.Model, s.First, s.End, tp))
	}
	sort.Strings(out)
	return out
}

// ParseShard reads one NodeInfo.shards entry, "MODEL:FIRST-END" (a
// tensor-parallel member's "@tpI/N" after it is left out).
func ParseShard(s string) (model string, first, end int, ok bool) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", 0, 0, false
	}
	if _, err := fmt.Sscanf(s[i+1:], "%d-%d", &first, &end); err != nil {
		return "", 0, 0, false
	}
	return s[:i], first, end, true
}
