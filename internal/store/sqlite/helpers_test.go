package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// Interface check: the store is the live log's durable sink.
var _ session.Sink = (*Store)(nil)

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newStore opens a fresh store in a not-yet-existing directory.
func newStore(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "home", "dsh.db")
	return openAt(t, path), path
}

func hdr(id string) session.Header {
	return session.Header{Version: session.FormatVersion, ID: id, CreatedAt: 1_700_000_000_000, Cwd: "/work/project"}
}

// ev builds a valid envelope; surface types get the append op.
func ev(t testing.TB, seq int64, typ string, data any) session.Event {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	e := session.Event{Type: typ, Seq: seq, Time: 1_700_000_000_000 + seq, Data: raw}
	if session.IsSurfaceType(typ) {
		e.SurfaceOp = session.Append
	}
	return e
}

func mustCreate(t testing.TB, s *Store, id string) {
	t.Helper()
	if err := s.Create(context.Background(), hdr(id)); err != nil {
		t.Fatalf("Create %s: %v", id, err)
	}
}

func mustAppend(t testing.TB, s *Store, id string, events ...session.Event) {
	t.Helper()
	if err := s.Append(context.Background(), id, events); err != nil {
		t.Fatalf("Append %s: %v", id, err)
	}
}

// rowCount counts the stored event rows of id with raw SQL.
func rowCount(t testing.TB, s *Store, id string) int64 {
	t.Helper()
	var n int64
	if err := s.r.QueryRow(`SELECT count(*) FROM events WHERE session_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// rawExec tampers with the database behind the store's back.
func rawExec(t testing.TB, s *Store, query string, args ...any) {
	t.Helper()
	if _, err := s.w.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// simpleLog is a complete, balanced turn.
func simpleLog(t testing.TB) []session.Event {
	user := llm.Message{ID: "u1", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("hi <there> & you")}, Source: llm.Source{Kind: "user"}}
	reply := llm.Message{ID: "a1", Role: llm.RoleAssistant, Content: []llm.Block{llm.TextBlock("hello")}, Source: llm.Source{Kind: "model"}}
	am := ev(t, 4, session.TypeAssistantMsg, session.AssistantMessage{Turn: 0, Step: 0, Message: reply})
	am.SourceEventSeqs = []int64{3}
	return []session.Event{
		ev(t, 0, session.TypeUserMessage, user),
		ev(t, 1, session.TypeTurnStart, session.TurnStart{Turn: 0}),
		ev(t, 2, session.TypeStepStart, session.StepRef{Turn: 0, Step: 0}),
		ev(t, 3, session.TypeAssistantChunk, session.AssistantChunk{Chunk: llm.Chunk{Type: llm.ChunkTextDelta, Text: "hello"}}),
		am,
		ev(t, 5, session.TypeStepEnd, session.StepRef{Turn: 0, Step: 0}),
		ev(t, 6, session.TypeTurnEnd, session.TurnEnd{Turn: 0, Reason: session.TurnEndReason{Kind: session.EndCompleted}}),
	}
}

// crashedLog is a turn cut off while running the first of two requested
// tool calls: call-a has a tool/call, call-b never started.
func crashedLog(t testing.TB) []session.Event {
	user := llm.Message{ID: "u1", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("look around")}, Source: llm.Source{Kind: "user"}}
	reply := llm.Message{ID: "a1", Role: llm.RoleAssistant, Source: llm.Source{Kind: "model"}, Content: []llm.Block{
		llm.TextBlock("checking"),
		{Type: llm.BlockToolCall, ID: "call-a", Name: "read", Arguments: `{"path":"a.txt"}`},
		{Type: llm.BlockToolCall, ID: "call-b", Name: "bash", Arguments: `{"cmd":"ls"}`},
	}}
	return []session.Event{
		ev(t, 0, session.TypeUserMessage, user),
		ev(t, 1, session.TypeTurnStart, session.TurnStart{Turn: 0}),
		ev(t, 2, session.TypeStepStart, session.StepRef{Turn: 0, Step: 0}),
		ev(t, 3, session.TypeAssistantMsg, session.AssistantMessage{Turn: 0, Step: 0, Message: reply}),
		ev(t, 4, session.TypeToolCall, session.ToolCall{Turn: 0, Step: 0, CallID: "call-a", Name: "read", Arguments: `{"path":"a.txt"}`}),
	}
}
