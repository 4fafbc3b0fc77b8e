package session

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// TestInboxRefStoresThePromptOnce: a user/message appended with FromInbox
// reaches the sink as a reference, so the prompt's text is stored once
// (in the splice that queued it), while the log, a log resumed from the
// sink and DeriveMessages over the stored events all see the message whole.
func TestInboxRefStoresThePromptOnce(t *testing.T) {
	sink := &memSink{}
	l, err := NewLog(Header{ID: "s"}, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	prompt := userMsg("the-one-prompt")
	other := userMsg("other")
	sp, err := l.Append(TypeInboxSpliced, InboxSpliced{Target: TargetNextTurn, Inserted: []llm.Message{other, prompt}})
	if err != nil {
		t.Fatal(err)
	}
	um, err := l.Append(TypeUserMessage, prompt, Surface(), FromInbox(InboxRef{Seq: sp.Seq, Index: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range sink.events {
		n += bytes.Count(e.Data, []byte(`"text":"the-one-prompt"`))
	}
	if n != 1 {
		t.Errorf("the prompt is stored %d times, want 1: %+v", n, sink.events)
	}
	if stored := string(sink.events[1].Data); !strings.Contains(stored, `"inboxRef":{"seq":0,"index":1}`) || !strings.Contains(stored, prompt.ID) {
		t.Errorf("stored user/message %s", stored)
	}
	// The live log, its Append result and a resumed log hold it whole.
	want := []llm.Message{prompt}
	if got := l.Messages(); !reflect.DeepEqual(got, want) {
		t.Errorf("live history %+v", got)
	}
	if !bytes.Equal(um.Data, l.Events()[1].Data) || !strings.Contains(string(um.Data), `"text":"the-one-prompt"`) {
		t.Errorf("appended event %s", um.Data)
	}
	resumed, err := NewLog(Header{ID: "s"}, sink.events, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resumed.Messages(); !reflect.DeepEqual(got, want) {
		t.Errorf("resumed history %+v", got)
	}
	if !reflect.DeepEqual(resumed.Events(), l.Events()) {
		t.Error("resumed events differ from the live ones")
	}
	if got, err := DeriveMessages(sink.events); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("derived from stored events: %+v, %v", got, err)
	}
	expanded, err := ExpandEvents(sink.events)
	if err != nil || !reflect.DeepEqual(expanded, l.Events()) {
		t.Errorf("ExpandEvents: %v", err)
	}
	if again, _ := ExpandEvents(expanded); !reflect.DeepEqual(again, expanded) {
		t.Error("expanding twice changed the events")
	}
}

func TestInboxRefRejected(t *testing.T) {
	l, err := NewLog(Header{ID: "s"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompt := userMsg("p")
	sp, _ := l.Append(TypeInboxSpliced, InboxSpliced{Target: TargetNextTurn, Inserted: []llm.Message{prompt}})
	turn, _ := l.Append(TypeTurnStart, TurnStart{Turn: 1})
	changed := prompt
	changed.Content = []llm.Block{llm.TextBlock("edited")}
	for _, tc := range []struct {
		name string
		typ  string
		msg  any
		ref  InboxRef
		want string
	}{
		{"not a splice", TypeUserMessage, prompt, InboxRef{Seq: turn.Seq}, "no agent/inbox/spliced"},
		{"past the end", TypeUserMessage, prompt, InboxRef{Seq: 99}, "no agent/inbox/spliced"},
		{"bad index", TypeUserMessage, prompt, InboxRef{Seq: sp.Seq, Index: 1}, "inserted 1"},
		{"different message", TypeUserMessage, changed, InboxRef{Seq: sp.Seq}, "differs"},
		{"not a user/message", TypeTurnStart, TurnStart{Turn: 2}, InboxRef{Seq: sp.Seq}, "only user/message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := l.Len()
			_, err := l.Append(tc.typ, tc.msg, FromInbox(tc.ref))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want %q", err, tc.want)
			}
			if l.Len() != before {
				t.Error("a refused append was logged")
			}
		})
	}
	// A stored reference whose message id does not match is a format error.
	bad := []Event{
		{Type: TypeInboxSpliced, Seq: 0, Data: mustJSON(t, InboxSpliced{Target: TargetNextTurn, Inserted: []llm.Message{prompt}})},
		{Type: TypeUserMessage, Seq: 1, SurfaceOp: Append, Data: []byte(`{"id":"someone-else","inboxRef":{"seq":0,"index":0}}`)},
	}
	if _, err := NewLog(Header{ID: "s"}, bad, nil); err == nil || !strings.Contains(err.Error(), "someone-else") {
		t.Errorf("NewLog: %v", err)
	}
	if _, err := ExpandEvents(bad); err == nil {
		t.Error("ExpandEvents accepted a mismatched reference")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
