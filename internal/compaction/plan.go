package compaction

import (
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// plan returns k, the number of leading surface nodes to shadow (0: do
// nothing). nodes[k:] is the verbatim tail.
//
// A cut at k is valid only at a balanced boundary, because providers
// reject a tool result whose call is missing and a call left unanswered:
//   - nodes[k] (when k < len) is an assistant message or a user message
//     that is not a tool result;
//   - every tool call in nodes[:k] is answered in nodes[:k] (a call
//     answered later, or not yet, keeps its whole group in the tail).
//
// Normally the tail is the longest suffix that starts at a valid boundary
// and fits budget tokens; when none does, the cut is the latest valid
// boundary (the smallest tail possible). maximal (overflow recovery, when
// the estimate has proven wrong) ignores the budget and keeps only the
// shortest non-empty valid tail; it never shadows everything, since the
// request being retried must keep its latest input verbatim. A prefix
// that is only a previous summary is not worth a model call, so it plans
// nothing.
func plan(nodes []session.SurfaceNode, tokens []int, budget int, maximal bool) int {
	n := len(nodes)
	if n == 0 {
		return 0
	}
	valid := validCuts(nodes)
	tail := make([]int, n+1) // tail[k] = tokens of nodes[k:]
	for i := n - 1; i >= 0; i-- {
		tail[i] = tail[i+1] + tokens[i]
	}
	k := 0
	switch {
	case maximal:
		for i := n - 1; i >= 1 && k == 0; i-- {
			if valid[i] {
				k = i
			}
		}
	case tail[0] <= budget:
		return 0 // everything fits in the tail
	default:
		for i := 1; i <= n; i++ {
			if valid[i] {
				k = i // the latest valid cut so far
				if tail[i] <= budget {
					break
				}
			}
		}
	}
	if k == 1 && IsSummary(nodes[0].Message) {
		return 0
	}
	return k
}

// validCuts reports for each k in [0, len(nodes)] whether the history may
// be cut before nodes[k].
func validCuts(nodes []session.SurfaceNode) []bool {
	n := len(nodes)
	// answered[id] is the index of the node answering call id.
	answered := map[string]int{}
	for i, nd := range nodes {
		for _, b := range nd.Message.Content {
			if b.Type == llm.BlockToolResult {
				if _, dup := answered[b.ToolCallID]; !dup {
					answered[b.ToolCallID] = i
				}
			}
		}
	}
	valid := make([]bool, n+1)
	// openUntil is the last index a call made before the cut needs; a
	// call never answered needs the whole history (index n).
	openUntil := -1
	for k := 0; k <= n; k++ {
		if k > 0 {
			for _, c := range nodes[k-1].Message.ToolCalls() {
				r, ok := answered[c.ID]
				if !ok {
					r = n
				}
				openUntil = max(openUntil, r)
			}
		}
		if openUntil >= k {
			continue
		}
		valid[k] = k == n || startsTail(nodes[k].Message)
	}
	return valid
}

// startsTail reports whether a verbatim tail may begin with m.
func startsTail(m llm.Message) bool {
	switch m.Role {
	case llm.RoleAssistant:
		return true
	case llm.RoleUser:
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult {
				return false
			}
		}
		return true
	}
	return false
}
