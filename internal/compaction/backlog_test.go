package compaction

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestBacklogFoldEqualsWholeFold: a meter that folds only the backlog
// that can matter (foldBacklog) estimates exactly what a meter that
// folded every event does, for logs with and without replaces, anchors
// on either side of them, kept tails older than the summary and empty
// replace anchors, after every append.
func TestBacklogFoldEqualsWholeFold(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			log, err := session.NewLog(session.Header{ID: "backlog"}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			add := func(typ string, data any, opts ...session.AppendOption) {
				t.Helper()
				if _, err := log.Append(typ, data, opts...); err != nil {
					t.Fatal(err)
				}
			}
			add(session.TypeRequestHeader, session.RequestHeader{Reason: "initial", Header: session.RequestHeaderData{System: strings.Repeat("s", 200)}})
			add(session.TypeRequestContext, session.RequestContext{ContextWindow: 8000})
			add(session.TypeUserMessage, llm.Message{ID: "u", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("task")}, Source: llm.Source{Kind: "user"}}, session.Surface())
			for i := range 60 {
				switch k := r.IntN(10); {
				case k < 6:
					id := fmt.Sprint("c", i)
					var u *llm.Usage
					if r.IntN(2) == 0 {
						u = &llm.Usage{InputTokens: int64(100 + r.IntN(5000)), OutputTokens: 10}
					}
					add(session.TypeAssistantMsg, session.AssistantMessage{Usage: u, Message: llm.Message{ID: "a" + id, Role: llm.RoleAssistant,
						Content: []llm.Block{{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: `{"command":"ls"}`}}}}, session.Surface())
					add(session.TypeToolResult, session.ToolResult{CallID: id, Name: "bash", Content: []llm.Block{llm.TextBlock(strings.Repeat("o", r.IntN(900)))}}, session.Surface())
				case k < 8:
					n := len(log.History())
					if n < 2 {
						continue
					}
					end := r.IntN(n - 1) // keep a tail older than the summary
					msg := session.AssistantMessage{Message: llm.Message{ID: fmt.Sprint("s", i), Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("summary")}}}
					if r.IntN(4) == 0 {
						msg.Message.Content = nil // an empty replace anchor
					}
					add(session.TypeAssistantMsg, msg, func(e *session.Event) { e.SurfaceOp = &session.SurfaceOp{Replace: true, Start: 0, End: end} })
				case k < 9:
					add(session.TypeRequestHeader, session.RequestHeader{Reason: "changed", Header: session.RequestHeaderData{System: strings.Repeat("h", r.IntN(400))}})
				default:
					add(session.TypeRequestContext, session.RequestContext{ContextWindow: 4000 + r.IntN(8000)})
				}
				whole := newMeter()
				for e := range log.View().All() {
					whole.fold(e)
				}
				part := newMeter()
				part.foldBacklog(log)
				nodes := log.Surface()
				enter := []llm.Message{{ID: "e", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("next")}}}
				if a, b := whole.estimate(nodes, enter), part.estimate(nodes, enter); a != b {
					t.Fatalf("after event %d: estimate %d from the whole log, %d from the backlog (from seq %d)", log.Len()-1, a, b, backlogStart(log))
				}
				if a, b := fmt.Sprint(whole.nodeTokens(nodes)), fmt.Sprint(part.nodeTokens(nodes)); a != b {
					t.Fatalf("after event %d: node tokens %s from the whole log, %s from the backlog", log.Len()-1, a, b)
				}
				if a, b := whole.snapshot(), part.snapshot(); a.window != b.window || a.header.System != b.header.System {
					t.Fatalf("after event %d: header/window differ", log.Len()-1)
				}
			}
		})
	}
}
