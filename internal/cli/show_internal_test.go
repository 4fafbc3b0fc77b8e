package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// TestStreamSessionSameAsInspect: `sessions show` read a page at a time
// prints exactly what it printed from the whole log (Inspect): inbox
// references expanded across pages, a crash's closers added, as a
// transcript and as JSON lines.
func TestStreamSessionSameAsInspect(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := session.Header{Version: session.FormatVersion, ID: "long", CreatedAt: 1780000000000, Cwd: "/w"}
	if err := st.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	log, err := session.NewLog(h, nil, st)
	if err != nil {
		t.Fatal(err)
	}
	app := func(typ string, data any, opts ...session.AppendOption) session.Event {
		t.Helper()
		e, err := log.Append(typ, data, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Three turns over more than two pages; each prompt waits in the
	// inbox and is stored as a reference to its splice.
	for turn := 1; turn <= 3; turn++ {
		prompt := llm.Message{ID: fmt.Sprintf("u%d", turn), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(fmt.Sprintf("prompt %d", turn))}, Source: llm.Source{Kind: "user"}}
		sp := app(session.TypeInboxSpliced, session.InboxSpliced{Target: "next-turn", Inserted: []llm.Message{prompt}})
		app(session.TypeTurnStart, session.TurnStart{Turn: turn})
		app(session.TypeUserMessage, prompt, session.FromInbox(session.InboxRef{Seq: sp.Seq}))
		for step := 1; step <= 150; step++ {
			call := llm.Block{Type: llm.BlockToolCall, ID: fmt.Sprintf("c%d-%d", turn, step), Name: "bash", Arguments: `{"command":"ls"}`}
			app(session.TypeStepStart, session.StepRef{Turn: turn, Step: step})
			app(session.TypeAssistantMsg, session.AssistantMessage{Turn: turn, Step: step, Message: llm.Message{ID: fmt.Sprintf("a%d-%d", turn, step), Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("Listing."), call}}})
			app(session.TypeToolCall, session.ToolCall{Turn: turn, Step: step, CallID: call.ID, Name: "bash", Arguments: call.Arguments})
			if turn == 3 && step == 150 {
				break // the process stopped while the call ran
			}
			app(session.TypeToolResult, session.ToolResult{Turn: turn, Step: step, CallID: call.ID, Name: "bash", Content: []llm.Block{llm.TextBlock("a.go\n\n[exit code: 0]")}})
			app(session.TypeStepEnd, session.StepRef{Turn: turn, Step: step})
		}
		if turn < 3 {
			app(session.TypeTurnEnd, session.TurnEnd{Turn: turn, Reason: session.TurnEndReason{Kind: session.EndCompleted}})
		}
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := log.Len(); n < 2*showPage+2 {
		t.Fatalf("only %d events", n)
	}
	wh, events, err := st.Inspect(ctx, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	if events[len(events)-1].Type != session.TypeTurnEnd || len(events) <= log.Len() {
		t.Fatalf("Inspect added no closers")
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	var got bytes.Buffer
	if err := streamSession(ctx, st, h.ID, true, &got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("show --json differs from the whole log's events (%d vs %d bytes)", got.Len(), want.Len())
	}
	got.Reset()
	if err := streamSession(ctx, st, h.ID, false, &got); err != nil {
		t.Fatal(err)
	}
	if tr := Transcript(wh, events); got.String() != tr {
		t.Errorf("show differs from the whole log's transcript:\n--- got\n%.2000s\n--- want\n%.2000s", got.String(), tr)
	}
	if !bytes.Contains(got.Bytes(), []byte("title prompt 1\n")) || !bytes.Contains(got.Bytes(), []byte("[user] prompt 3")) {
		t.Errorf("transcript lacks the title or an expanded prompt:\n%.500s", got.String())
	}
}
