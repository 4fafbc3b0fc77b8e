package session

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

func TestCheckLossless(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string
	}{
		{`{}`, ""},
		{`{"a":[1,2,{"b":null}],"c":"x"}`, ""},
		{`{"a":1,"a":2}`, "duplicate key"},
		{`{"a":{"b":1,"b":1}}`, "duplicate key"},
		{``, "empty"},
		{`{"a":1} {"b":2}`, "trailing"},
		{`{"a":`, "not lossless"},
		{`NaN`, "not lossless"},
	} {
		err := CheckLossless([]byte(tc.in))
		if tc.wantErr == "" && err != nil {
			t.Errorf("CheckLossless(%q) = %v, want nil", tc.in, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckLossless(%q) = %v, want error containing %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestEventValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   Event
		ok   bool
	}{
		{"known", Event{Type: TypeTurnStart, Data: json.RawMessage(`{"turn":1}`)}, true},
		{"unknown", Event{Type: "x/y", Data: json.RawMessage(`{}`)}, false},
		{"unknown ignorable", Event{Type: "x/y", Data: json.RawMessage(`{}`), Ignorable: true}, true},
		{"surface without op", Event{Type: TypeUserMessage, Data: json.RawMessage(`{}`)}, false},
		{"log-only with op", Event{Type: TypeTurnStart, Data: json.RawMessage(`{}`), SurfaceOp: Append}, false},
		{"bad data", Event{Type: TypeTurnStart, Data: json.RawMessage(`{"a":1,"a":1}`)}, false},
		{"no type", Event{Data: json.RawMessage(`{}`)}, false},
	} {
		if err := tc.ev.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestSurfaceOpJSON(t *testing.T) {
	for _, op := range []SurfaceOp{{}, {Replace: true, Start: 2, End: 5}} {
		b, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		var got SurfaceOp
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if got != op {
			t.Errorf("round trip %s: got %+v want %+v", b, got, op)
		}
	}
	var op SurfaceOp
	if err := json.Unmarshal([]byte(`"bogus"`), &op); err == nil {
		t.Error("want error for bogus surfaceOp")
	}
}

type memSink struct {
	events []Event
	fail   error
}

func (m *memSink) Append(_ context.Context, _ string, evs []Event) error {
	if m.fail != nil {
		return m.fail
	}
	if len(evs) > 0 && evs[0].Seq != int64(len(m.events)) {
		return errors.New("seq conflict")
	}
	m.events = append(m.events, evs...)
	return nil
}

func userMsg(text string) llm.Message {
	return llm.Message{ID: "u-" + text, Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: llm.Source{Kind: "user"}}
}

func TestLogAppendFlushAndDerive(t *testing.T) {
	sink := &memSink{}
	l, err := NewLog(Header{ID: "s1"}, nil, sink)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int64
	l.Observe(func(e Event) { seen = append(seen, e.Seq) })
	mustAppend := func(typ string, data any, opts ...AppendOption) {
		t.Helper()
		if _, err := l.Append(typ, data, opts...); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(TypeTurnStart, TurnStart{Turn: 1})
	mustAppend(TypeUserMessage, userMsg("hi"), Surface())
	call := llm.Block{Type: llm.BlockToolCall, ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}
	mustAppend(TypeAssistantMsg, AssistantMessage{Turn: 1, Step: 1, Message: llm.Message{ID: "a1", Role: llm.RoleAssistant, Content: []llm.Block{call}}})
	mustAppend(TypeAssistantMsg, AssistantMessage{Turn: 1, Step: 1, Message: llm.Message{ID: "a2", Role: llm.RoleAssistant, Content: []llm.Block{}}})
	mustAppend(TypeToolResult, ToolResult{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Content: []llm.Block{llm.TextBlock("out")}})
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(sink.events) != 5 || len(seen) != 5 {
		t.Fatalf("sink has %d events, observers saw %d; want 5", len(sink.events), len(seen))
	}
	msgs := l.Messages()
	if len(msgs) != 3 {
		t.Fatalf("derived %d messages, want 3 (empty assistant anchor skipped): %+v", len(msgs), msgs)
	}
	if msgs[2].Content[0].Type != llm.BlockToolResult || msgs[2].Content[0].ToolCallID != "c1" {
		t.Errorf("tool result not derived: %+v", msgs[2])
	}
	cold, err := DeriveMessages(sink.events)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(cold)
	b, _ := json.Marshal(msgs)
	if string(a) != string(b) {
		t.Errorf("cold derivation differs from live:\n%s\n%s", a, b)
	}
}

func TestLogFlushFailureKeepsEvents(t *testing.T) {
	sink := &memSink{fail: errors.New("disk full")}
	l, _ := NewLog(Header{ID: "s"}, nil, sink)
	if _, err := l.Append(TypeTurnStart, TurnStart{Turn: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(t.Context()); err == nil {
		t.Fatal("want flush error")
	}
	sink.fail = nil
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(sink.events) != 1 {
		t.Fatalf("sink has %d events after retry, want 1", len(sink.events))
	}
}

func TestLogRejectsBadAppend(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	if _, err := l.Append("no/such", struct{}{}); err == nil {
		t.Error("unknown type accepted")
	}
	if _, err := l.Append(TypeTurnStart, json.RawMessage(`{"turn":1,"turn":2}`)); err == nil {
		t.Error("lossy data accepted")
	}
	if l.Len() != 0 {
		t.Errorf("rejected appends changed the log: %d events", l.Len())
	}
}

func TestReplaceSurface(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	for _, s := range []string{"a", "b", "c"} {
		if _, err := l.Append(TypeUserMessage, userMsg(s), Surface()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(TypeUserMessage, userMsg("summary"), func(e *Event) {
		e.SurfaceOp = &SurfaceOp{Replace: true, Start: 0, End: 1}
		e.SourceEventSeqs = []int64{0, 1}
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range l.Messages() {
		got = append(got, m.Text())
	}
	if strings.Join(got, ",") != "summary,c" {
		t.Errorf("after replace: %v", got)
	}
	if _, err := l.Append(TypeUserMessage, userMsg("x"), func(e *Event) { e.SurfaceOp = &SurfaceOp{Replace: true, Start: 1, End: 9} }); err == nil {
		t.Error("out-of-range replace accepted")
	}
}

func buildLog(t *testing.T, steps func(app func(string, any))) []Event {
	t.Helper()
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	steps(func(typ string, data any) {
		if _, err := l.Append(typ, data); err != nil {
			t.Fatal(err)
		}
	})
	return l.Events()
}

func TestClosers(t *testing.T) {
	calls := []llm.Block{
		{Type: llm.BlockToolCall, ID: "c1", Name: "bash", Arguments: `{}`},
		{Type: llm.BlockToolCall, ID: "c2", Name: "bash", Arguments: `{}`},
		{Type: llm.BlockToolCall, ID: "c3", Name: "bash", Arguments: `{}`},
	}
	open := func(app func(string, any)) {
		app(TypeTurnStart, TurnStart{Turn: 1})
		app(TypeStepStart, StepRef{Turn: 1, Step: 1})
		app(TypeAssistantMsg, AssistantMessage{Turn: 1, Step: 1, Message: llm.Message{ID: "a", Role: llm.RoleAssistant, Content: calls}})
		app(TypeToolCall, ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "bash"})
		app(TypeToolResult, ToolResult{Turn: 1, Step: 1, CallID: "c1", Name: "bash", Content: []llm.Block{}})
		app(TypeToolCall, ToolCall{Turn: 1, Step: 1, CallID: "c2", Name: "bash"})
	}
	t.Run("open step", func(t *testing.T) {
		events := buildLog(t, open)
		cl := Closers(events)
		var kinds []string
		for _, e := range cl {
			k := e.Type
			switch e.Type {
			case TypeToolResult:
				var tr ToolResult
				_ = e.Decode(&tr)
				k += ":" + tr.CallID + ":" + tr.Error.Code
			case TypeToolCall:
				var tc ToolCall
				_ = e.Decode(&tc)
				k += ":" + tc.CallID + ":" + tc.Arguments
			}
			kinds = append(kinds, k)
		}
		want := "tool/result:c2:TOOL_OUTCOME_UNKNOWN,tool/call:c3:{},tool/result:c3:TOOL_NOT_STARTED,step/end,turn/end"
		if strings.Join(kinds, ",") != want {
			t.Errorf("closers = %v\nwant %s", kinds, want)
		}
		if cl[0].Seq != int64(len(events)) {
			t.Errorf("first closer seq %d, want %d", cl[0].Seq, len(events))
		}
		all := append(events, cl...)
		for _, e := range all {
			if err := e.Validate(); err != nil {
				t.Error(err)
			}
		}
		if again := Closers(all); again != nil {
			t.Errorf("balanced log got closers: %v", again)
		}
		if _, err := DeriveMessages(all); err != nil {
			t.Error(err)
		}
	})
	t.Run("open turn between steps", func(t *testing.T) {
		events := buildLog(t, func(app func(string, any)) {
			app(TypeTurnStart, TurnStart{Turn: 3})
			app(TypeStepStart, StepRef{Turn: 3, Step: 1})
			app(TypeStepEnd, StepRef{Turn: 3, Step: 1})
		})
		cl := Closers(events)
		if len(cl) != 1 || cl[0].Type != TypeTurnEnd {
			t.Fatalf("closers = %+v", cl)
		}
		var te TurnEnd
		_ = cl[0].Decode(&te)
		if te.Turn != 3 || te.Reason.Kind != EndInterrupted {
			t.Errorf("turn end = %+v", te)
		}
	})
	t.Run("balanced", func(t *testing.T) {
		events := buildLog(t, func(app func(string, any)) {
			app(TypeTurnStart, TurnStart{Turn: 1})
			app(TypeTurnEnd, TurnEnd{Turn: 1, Reason: TurnEndReason{Kind: EndCompleted}})
		})
		if cl := Closers(events); cl != nil {
			t.Errorf("closers = %+v", cl)
		}
		if cl := Closers(nil); cl != nil {
			t.Errorf("closers of empty log = %+v", cl)
		}
	})
}

func FuzzEventDecode(f *testing.F) {
	f.Add([]byte(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`))
	f.Add([]byte(`{"type":"user/message","seq":3,"time":1,"data":{"id":"x","role":"user","content":[]},"surfaceOp":{"op":"replace","start":0,"end":0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		if json.Unmarshal(b, &e) != nil {
			return
		}
		if e.Validate() != nil {
			return
		}
		_, _ = DeriveMessages([]Event{e})
		_ = Closers([]Event{e})
	})
}

func TestSurfaceNodesTrackSeqs(t *testing.T) {
	l, _ := NewLog(Header{ID: "s"}, nil, nil)
	for _, s := range []string{"a", "b", "c"} {
		if _, err := l.Append(TypeTurnStart, TurnStart{Turn: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(TypeUserMessage, userMsg(s), Surface()); err != nil {
			t.Fatal(err)
		}
	}
	nodes := l.Surface()
	if len(nodes) != 3 || nodes[0].Seq != 1 || nodes[2].Seq != 5 {
		t.Fatalf("nodes %+v", nodes)
	}
	e, err := l.Append(TypeUserMessage, userMsg("sum"), func(e *Event) {
		e.SurfaceOp = &SurfaceOp{Replace: true, Start: 0, End: 1}
		e.SourceEventSeqs = []int64{1, 3}
	})
	if err != nil {
		t.Fatal(err)
	}
	nodes = l.Surface()
	if len(nodes) != 2 || nodes[0].Seq != e.Seq || nodes[0].Message.Text() != "sum" || nodes[1].Seq != 5 {
		t.Fatalf("after replace %+v", nodes)
	}
}

// TestLogHistory checks that the history handed out without a copy never
// changes afterwards: appends go past it, a replace builds a new one, and
// appending to it leaves the log alone.
func TestLogHistory(t *testing.T) {
	l, err := NewLog(Header{ID: "s1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	add := func(text string, opts ...AppendOption) {
		t.Helper()
		if _, err := l.Append(TypeUserMessage, userMsg(text), append([]AppendOption{Surface()}, opts...)...); err != nil {
			t.Fatal(err)
		}
	}
	texts := func(ms []llm.Message) (out []string) {
		for _, m := range ms {
			out = append(out, m.Text())
		}
		return out
	}
	add("a")
	add("b")
	first := l.History()
	_ = append(first, userMsg("mine"))
	add("c")
	second := l.History()
	add("summary", func(e *Event) { e.SurfaceOp = &SurfaceOp{Replace: true, Start: 0, End: 1} })
	add("d")
	for _, c := range []struct {
		got  []llm.Message
		want []string
	}{
		{first, []string{"a", "b"}},
		{second, []string{"a", "b", "c"}},
		{l.History(), []string{"summary", "c", "d"}},
		{l.Messages(), []string{"summary", "c", "d"}},
	} {
		if got := texts(c.got); !slices.Equal(got, c.want) {
			t.Errorf("history %q; want %q", got, c.want)
		}
	}
}

// TestLogLatest checks the latest event of each type, for a seeded log
// and after appends, and that the event list read in place never changes.
func TestLogLatest(t *testing.T) {
	seed, err := NewLog(Header{ID: "s1"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := seed.Append(TypeTurnStart, TurnStart{Turn: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := NewLog(Header{ID: "s1"}, seed.Events(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := l.Latest(TypeTurnStart); !ok || e.Seq != 2 {
		t.Fatalf("latest turn/start of the seed: %+v %v; want seq 2", e, ok)
	}
	view := l.View()
	if _, err := l.Append(TypeUserMessage, userMsg("hi"), Surface()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(TypeTurnStart, TurnStart{Turn: 4}); err != nil {
		t.Fatal(err)
	}
	if e, ok := l.Latest(TypeTurnStart); !ok || e.Seq != 4 {
		t.Fatalf("latest turn/start: %+v %v; want seq 4", e, ok)
	}
	if e, ok := l.Latest(TypeUserMessage); !ok || e.Seq != 3 {
		t.Fatalf("latest user/message: %+v %v; want seq 3", e, ok)
	}
	if _, ok := l.Latest(TypeToolResult); ok {
		t.Fatal("latest tool/result of a log without one")
	}
	if view.Len() != 3 || view.At(2).Seq != 2 || l.View().Len() != 5 {
		t.Fatalf("views: %d then %d events", view.Len(), l.View().Len())
	}
}
