package compaction

import (
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// nodes builds a surface from a compact spec, one word per node:
// "u" user prompt, "a" assistant text, "a:c1,c2" assistant calling c1 and
// c2, "r:c1" the result of c1, "s" a previous summary.
func nodes(spec string) []session.SurfaceNode {
	var out []session.SurfaceNode
	for i, w := range strings.Fields(spec) {
		kind, arg, _ := strings.Cut(w, ":")
		var m llm.Message
		switch kind {
		case "u":
			m = llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("prompt")}, Source: llm.Source{Kind: "user"}}
		case "s":
			m = SummaryMessage("c", []llm.Block{llm.TextBlock("earlier")})
		case "a":
			m = llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("ok")}}
			for _, id := range strings.Split(arg, ",") {
				if id != "" {
					m.Content = append(m.Content, llm.Block{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: "{}"})
				}
			}
		case "r":
			m = session.ToolResultMessage(session.ToolResult{CallID: arg, Name: "bash", Content: []llm.Block{llm.TextBlock("out")}})
		default:
			panic("bad spec word " + w)
		}
		out = append(out, session.SurfaceNode{Seq: int64(10 * i), Message: m})
	}
	return out
}

func ones(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    string
		tokens  []int // nil: one token per node
		budget  int
		maximal bool
		want    int
	}{
		{name: "empty", spec: "", budget: 0, want: 0},
		{name: "everything fits", spec: "u a u a", budget: 4, want: 0},
		{name: "cut before a user prompt", spec: "u a u a", budget: 2, want: 2},
		{name: "cut before an assistant message", spec: "u a u a", budget: 3, want: 1},
		{name: "tail begins after the whole group", spec: "u a:c1 r:c1 a:c2 r:c2 a", budget: 2, want: 5},
		{name: "never between a call and its result", spec: "u a:c1 r:c1 a:c2 r:c2 a", budget: 1, want: 5},
		{name: "group that fits is kept whole", spec: "u a:c1 r:c1 a:c2 r:c2 a", budget: 3, want: 3},
		{name: "parallel calls stay together", spec: "u a:c1,c2 r:c1 r:c2 a", budget: 2, want: 4},
		{name: "parallel calls kept whole when they fit", spec: "u a:c1,c2 r:c1 r:c2 a", budget: 4, want: 1},
		{name: "last group too big: shadow everything", spec: "u a:c1 r:c1", tokens: []int{1, 1, 50}, budget: 10, want: 3},
		{name: "unanswered call stays in the tail", spec: "u a u a:c1", budget: 0, want: 3},
		{name: "unanswered call at the start: nothing valid", spec: "a:c1 r:c2", budget: 0, want: 0},
		{name: "only a previous summary to shadow", spec: "s u a", budget: 2, want: 0},
		{name: "previous summary is merged", spec: "s u a u a", budget: 2, want: 3},
		{name: "big old node, small tail", spec: "u a u a", tokens: []int{1, 100, 1, 1}, budget: 5, want: 2},
		{name: "maximal keeps the shortest tail", spec: "u a:c1 r:c1 a u", budget: 100, maximal: true, want: 4},
		{name: "maximal keeps the last group", spec: "u a u a:c1 r:c1", budget: 100, maximal: true, want: 3},
		{name: "maximal never shadows everything", spec: "a:c1 r:c1", maximal: true, want: 0},
		{name: "maximal with only a prompt", spec: "u", maximal: true, want: 0},
		{name: "maximal with only a summary before the tail", spec: "s u", maximal: true, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nodes(tc.spec)
			tokens := tc.tokens
			if tokens == nil {
				tokens = ones(len(ns))
			}
			got := plan(ns, tokens, tc.budget, tc.maximal)
			if got != tc.want {
				t.Fatalf("plan(%q, budget %d) = %d, want %d", tc.spec, tc.budget, got, tc.want)
			}
			if got > 0 {
				checkBalancedCut(t, ns, got)
			}
		})
	}
}

// checkBalancedCut asserts the cut's invariants independently of plan:
// every call in the prefix is answered in the prefix, and the tail
// starts with an assistant message or a user message that is no result.
func checkBalancedCut(t *testing.T, ns []session.SurfaceNode, k int) {
	t.Helper()
	calls := map[string]bool{}
	for _, n := range ns[:k] {
		for _, c := range n.Message.ToolCalls() {
			calls[c.ID] = true
		}
		for _, b := range n.Message.Content {
			if b.Type == llm.BlockToolResult {
				delete(calls, b.ToolCallID)
			}
		}
	}
	if len(calls) > 0 {
		t.Errorf("prefix [0,%d) leaves calls unanswered: %v", k, calls)
	}
	if k < len(ns) && !startsTail(ns[k].Message) {
		t.Errorf("tail starts with a tool result at %d", k)
	}
}

func TestPruneMessage(t *testing.T) {
	long := strings.Repeat("0123456789", 100) // 1000 bytes
	for _, tc := range []struct {
		name   string
		msg    llm.Message
		limit  int
		pruned bool
	}{
		{"short result", session.ToolResultMessage(session.ToolResult{CallID: "c", Content: []llm.Block{llm.TextBlock("hi")}}), 100, false},
		{"long result", session.ToolResultMessage(session.ToolResult{CallID: "c", Content: []llm.Block{llm.TextBlock(long)}}), 100, true},
		{"long user text is not a tool result", llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(long)}}, 100, false},
		{"pruning off", session.ToolResultMessage(session.ToolResult{CallID: "c", Content: []llm.Block{llm.TextBlock(long)}}), -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.msg.Content[0]
			got, pruned := pruneMessage(tc.msg, tc.limit)
			if pruned != tc.pruned {
				t.Fatalf("pruned = %v, want %v", pruned, tc.pruned)
			}
			if tc.msg.Content[0].Text != before.Text || (len(before.Content) > 0 && tc.msg.Content[0].Content[0].Text != before.Content[0].Text) {
				t.Fatal("the original message was changed")
			}
			if !pruned {
				return
			}
			text := got.Content[0].Content[0].Text
			if !strings.HasPrefix(text, long[:tc.limit/2]) || !strings.HasSuffix(text, long[len(long)-tc.limit/4:]) || !strings.Contains(text, "925 bytes of this tool output omitted") {
				t.Errorf("pruned text = %q", text)
			}
		})
	}
}

func TestHeadTailKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 50) // 2 bytes per rune
	got := headTail(s, 5, 5)
	if !strings.HasPrefix(got, "éé\n") || !strings.HasSuffix(got, "\néé") {
		t.Errorf("headTail split a rune: %q", got)
	}
}
