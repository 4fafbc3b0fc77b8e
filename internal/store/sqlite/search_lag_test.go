package sqlite

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// stepEvents are one agent step's two appends, as the loop makes them:
// the model's message and its tool call, then the result.
func stepEvents(t testing.TB, first int64, step int) ([]session.Event, []session.Event) {
	call := fmt.Sprint("c", first)
	cmd := fmt.Sprintf(`{"command":"echo marker%d"}`, step)
	am := llm.Message{ID: fmt.Sprint("a", first), Role: llm.RoleAssistant, Source: llm.Source{Kind: "model"}, Content: []llm.Block{
		llm.TextBlock(fmt.Sprintf("running step%d", step)),
		{Type: llm.BlockToolCall, ID: call, Name: "bash", Arguments: cmd},
	}}
	return []session.Event{
			ev(t, first, session.TypeStepStart, session.StepRef{}),
			ev(t, first+1, session.TypeAssistantMsg, session.AssistantMessage{Message: am}),
			ev(t, first+2, session.TypeToolCall, session.ToolCall{CallID: call, Name: "bash", Arguments: cmd}),
		}, []session.Event{
			ev(t, first+3, session.TypeToolResult, session.ToolResult{CallID: call, Name: "bash", Content: []llm.Block{llm.TextBlock(fmt.Sprintf("output%d", step))}}),
			ev(t, first+4, session.TypeStepEnd, session.StepRef{}),
		}
}

// lag is the session's first unindexed seq, -1 for none.
func lag(t testing.TB, s *Store, id string) int64 {
	t.Helper()
	var from int64
	if err := s.r.QueryRow(`SELECT ifnull(search_from, -1) FROM sessions WHERE id = ?`, id).Scan(&from); err != nil {
		t.Fatal(err)
	}
	return from
}

// requireRebuilt fails unless session id's index rows are those Reindex
// rebuilds from its stored events.
func requireRebuilt(t *testing.T, s *Store, id string) {
	t.Helper()
	rows := indexRows(t, s)
	if _, _, err := s.Reindex(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if rebuilt := indexRows(t, s); !reflect.DeepEqual(rows, rebuilt) {
		t.Fatalf("the index rows differ from a rebuild:\n%q\n%q", rows, rebuilt)
	}
}

func searchSeqs(t testing.TB, s *Store, text string) []int64 {
	t.Helper()
	hits, err := s.SearchEvents(t.Context(), store.SearchQuery{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, h := range hits {
		seqs = append(seqs, h.Seq)
	}
	return seqs
}

// A step's appends leave their events unindexed (the lag is recorded);
// a search catches up first and finds them, and the rows it writes are
// those a rebuild from the stored log writes.
func TestSearchLagCaughtUpBySearch(t *testing.T) {
	s, _ := newStore(t)
	mustCreate(t, s, "x")
	for step := range 4 {
		a, b := stepEvents(t, int64(step*5), step)
		mustAppend(t, s, "x", a...)
		mustAppend(t, s, "x", b...)
	}
	if rows := indexRows(t, s); len(rows) != 0 || lag(t, s, "x") != 0 {
		t.Fatalf("the steps were indexed at once: %d rows, lag from %d", len(rows), lag(t, s, "x"))
	}
	if got := searchSeqs(t, s, "output2"); !reflect.DeepEqual(got, []int64{13}) {
		t.Fatalf("search for output2: seqs %v, want [13]", got)
	}
	if got := searchSeqs(t, s, "marker3"); !reflect.DeepEqual(got, []int64{17}) { // the tool call
		t.Fatalf("search for marker3: seqs %v, want [17]", got)
	}
	if lag(t, s, "x") != -1 {
		t.Fatal("the search left the lag")
	}
	requireRebuilt(t, s, "x")
}

// The lag stays under searchLagMax events: the append that would reach
// it indexes everything; one that ends a turn indexes at once.
func TestSearchLagBounded(t *testing.T) {
	s, _ := newStore(t)
	mustCreate(t, s, "x")
	seq := int64(0)
	for step := range 3 * searchLagMax / 5 {
		a, b := stepEvents(t, seq, step)
		mustAppend(t, s, "x", a...)
		mustAppend(t, s, "x", b...)
		seq += 5
		if from := lag(t, s, "x"); from >= 0 && seq-from >= searchLagMax {
			t.Fatalf("after seq %d, %d events are unindexed", seq, seq-from)
		}
	}
	if rows := indexRows(t, s); len(rows) == 0 {
		t.Fatal("nothing was indexed without a search")
	}
	mustAppend(t, s, "x", ev(t, seq, session.TypeTurnEnd, session.TurnEnd{Reason: session.TurnEndReason{Kind: session.EndCompleted}}))
	if from := lag(t, s, "x"); from != -1 {
		t.Fatalf("a turn's end left events from %d unindexed", from)
	}
	requireRebuilt(t, s, "x")
}

// A lag survives the process (a crash mid-turn): the next process's
// search finds what the last one left unindexed, and Reindex clears it.
func TestSearchLagSurvivesReopen(t *testing.T) {
	s, path := newStore(t)
	mustCreate(t, s, "x")
	mustCreate(t, s, "y")
	a, b := stepEvents(t, 0, 7)
	mustAppend(t, s, "x", a...)
	mustAppend(t, s, "x", b...)
	a, _ = stepEvents(t, 0, 8)
	mustAppend(t, s, "y", a...)
	s.Close()
	s = openAt(t, path)
	if lag(t, s, "x") != 0 || lag(t, s, "y") != 0 {
		t.Fatal("the lag was lost")
	}
	if _, _, err := s.Reindex(t.Context(), "y"); err != nil {
		t.Fatal(err)
	}
	if lag(t, s, "y") != -1 || lag(t, s, "x") != 0 {
		t.Fatalf("Reindex of y: lags x %d, y %d", lag(t, s, "x"), lag(t, s, "y"))
	}
	if got := searchSeqs(t, s, "output7"); !reflect.DeepEqual(got, []int64{3}) {
		t.Fatalf("search for output7 after reopening: %v", got)
	}
	if got := searchSeqs(t, s, "marker8"); !reflect.DeepEqual(got, []int64{2}) {
		t.Fatalf("search for marker8 after reopening: %v", got)
	}
}
