package app

import (
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

// TestSessionProjectionsAreTyped: every unit of a session's projections
// lists the types it folds, so attaching them to a resumed log reads no
// streamed chunk back from the store (a unit without Types would fold
// every event, reading all of them back).
func TestSessionProjectionsAreTyped(t *testing.T) {
	reg, err := sessionProjections(session.Header{ID: "s"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	types := reg.Types()
	if types == nil {
		t.Fatal("a session projection folds every event type")
	}
	if slices.Contains(types, session.TypeAssistantChunk) {
		t.Fatalf("a session projection folds the streamed chunks: %v", types)
	}
}
