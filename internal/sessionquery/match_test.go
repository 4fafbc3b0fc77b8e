package sessionquery_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/sessionquery"
)

// MatchOf carries a real search hit's session and event into the shape
// the CLI and the HTTP API report; ShortID is left to the surface.
func TestMatchOf(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	add(t, st, "parent-1", "/w", "", "hello")
	add(t, st, "child-1", "/w", "parent-1", "otters hold hands")
	svc := sessionquery.New(st)
	hits, err := svc.SearchSessions(ctx, sessionquery.AllSessions(), "otters", 0)
	if err != nil || len(hits) != 1 {
		t.Fatalf("search: %v, %d hits", err, len(hits))
	}
	m := sessionquery.MatchOf(hits[0], "the snippet")
	if m.ID != "child-1" || m.Cwd != "/w" || m.Parent != "parent-1" || m.Seq != 0 || m.Type != hits[0].Hit.Type ||
		m.Time != 1 || m.Snippet != "the snippet" || m.ShortID != "" || m.UpdatedAt != hits[0].Entry.UpdatedAt || m.Status != hits[0].Entry.Status {
		t.Fatalf("MatchOf: %+v", m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["shortId"]; ok {
		t.Fatalf("an empty shortId is omitted: %s", raw)
	}
	for _, k := range []string{"id", "title", "cwd", "parentSession", "status", "updatedAt", "seq", "type", "time", "snippet"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("no %q in %s", k, raw)
		}
	}
}
