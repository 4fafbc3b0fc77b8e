package compaction

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestEstimateViewSameAsScan checks that the estimate made at every step
// from the log's surface view, with the sizes measured by the previous
// call reused, equals the estimate from a fresh copy of the surface,
// through a long session with usage anchors, compactions (replace ops),
// a changed header, and folds that lag behind the log (an append racing
// the estimate).
func TestEstimateViewSameAsScan(t *testing.T) {
	log, err := session.NewLog(session.Header{ID: "view"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := newMeter()
	var lagging []session.Event
	add := func(typ string, data any, opts ...session.AppendOption) {
		t.Helper()
		e, err := log.Append(typ, data, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq%5 == 0 {
			lagging = append(lagging, e) // folded after the next estimate
			return
		}
		m.fold(e)
	}
	enter := []llm.Message{{ID: "e", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("entering")}}}
	for i := range 400 {
		if i%100 == 0 {
			add(session.TypeRequestHeader, session.RequestHeader{Reason: "change", Header: session.RequestHeaderData{System: strings.Repeat("s", i+1)}})
		}
		var usage *llm.Usage
		if i%3 != 0 {
			usage = &llm.Usage{InputTokens: int64(100 * i), OutputTokens: 7}
		}
		id := fmt.Sprint("call", i)
		add(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: i, Usage: usage, Message: llm.Message{
			ID: fmt.Sprint("a", i), Role: llm.RoleAssistant,
			Content: []llm.Block{{Type: llm.BlockToolCall, ID: id, Name: "bash", Arguments: strings.Repeat("x", i%17)}},
		}}, session.Surface())
		add(session.TypeToolResult, session.ToolResult{Turn: 1, Step: i, CallID: id, Name: "bash", Content: []llm.Block{llm.TextBlock(strings.Repeat("o", i%29))}}, session.Surface())
		// Compactions: one that shortens the history, and one that
		// replaces a node with a message of another size in place.
		start, end := -1, -1
		switch n := len(log.History()); i % 90 {
		case 89:
			start, end = 0, n/2
		case 44:
			start, end = n/3, n/3
		}
		if start >= 0 {
			add(session.TypeUserMessage, llm.Message{ID: fmt.Sprint("s", i), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("summary " + strings.Repeat("z", i))}},
				func(e *session.Event) { e.SurfaceOp = &session.SurfaceOp{Replace: true, Start: start, End: end} })
		}
		for _, entering := range [][]llm.Message{nil, enter} {
			seqs, msgs := log.SurfaceView()
			got := m.estimateView(seqs, msgs, entering)
			if want := m.estimate(log.Surface(), entering); got != want {
				t.Fatalf("step %d: estimate from the view %d, from a copy %d", i, got, want)
			}
		}
		for _, e := range lagging {
			m.fold(e)
		}
		lagging = lagging[:0]
	}
}
