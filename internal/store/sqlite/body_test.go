package sqlite

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

// bodyCases are envelopes whose stored body must be Marshal's, byte for
// byte: data Marshal keeps and data it rewrites (spacing, <, >, &,
// U+2028), every optional field, and types it would quote differently.
func bodyCases() []session.Event {
	data := []string{
		`{}`, `{"a":1}`, `"x"`, `[1,2,{"b":null}]`, `{"t":"a b  c"}`,
		`{"q":"say \"hi\" \\ \\\" <"}`, `{"q":"\u003c\u003e\u0026 kept"}`,
		`{ "a": 1 }`, "{\n\t\"a\":1}", `{"h":"<b>&amp;</b>"}`, `{"l":"a` + "\u2028" + `b"}`,
		`{"l":"a` + "\u2029" + `b"}`, `{"e":"é ü ☃ 😀 \u00e9"}`, `{"n":-1.5e+10,"z":0}`,
		`{"esc":"\\\\"}`, `{"s":"\\"}`, `{"x":"` + "\u20ac" + `"}`,
	}
	var out []session.Event
	for i, d := range data {
		out = append(out, session.Event{Type: session.TypeUserMessage, Seq: int64(i), Time: 1700000000000 + int64(i), Data: json.RawMessage(d)})
	}
	base := session.Event{Type: session.TypeAssistantMsg, Seq: 7, Time: 1, Data: json.RawMessage(`{"m":"ok"}`)}
	for _, mod := range []func(*session.Event){
		func(e *session.Event) { e.Ignorable = true },
		func(e *session.Event) { e.SurfaceOp = session.Append },
		func(e *session.Event) { e.SurfaceOp = &session.SurfaceOp{Replace: true, Start: 3, End: 9} },
		func(e *session.Event) { e.SurfaceOp = session.Append; e.SourceEventSeqs = []int64{1, 2, 30000000000} },
		func(e *session.Event) { e.SourceEventSeqs = []int64{} },
		func(e *session.Event) { e.Ignorable, e.SurfaceOp, e.SourceEventSeqs = true, session.Append, []int64{0} },
		func(e *session.Event) { e.Type = "x.custom/type_1-a" },
		func(e *session.Event) { e.Type = "a<b" },
		func(e *session.Event) { e.Type = `q"t` },
		func(e *session.Event) { e.Type = "ü" },
		func(e *session.Event) { e.Seq, e.Time = -1, -5 },
	} {
		e := base
		mod(&e)
		out = append(out, e)
	}
	return out
}

// dataSpacing is ValidateSpacing's verdict on data alone (under a
// log-only type, whatever the event's envelope).
func dataSpacing(data json.RawMessage) (bool, error) {
	return session.Event{Type: session.TypeRequestContext, Data: data}.ValidateSpacing()
}

// encodeValidated is what the encoder does with an event.
func encodeValidated(t *testing.T, ev session.Event) []byte {
	t.Helper()
	spaced, err := dataSpacing(ev.Data)
	if err != nil {
		t.Fatalf("%s: %v", ev.Data, err)
	}
	got, err := encodeBody(ev, !spaced)
	if err != nil {
		t.Fatalf("%s: %v", ev.Data, err)
	}
	return got
}

func TestEncodeBodyIsMarshal(t *testing.T) {
	for _, ev := range bodyCases() {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeValidated(t, ev); !bytes.Equal(got, want) {
			t.Errorf("encodeBody(%s %s)\n got %s\nwant %s", ev.Type, ev.Data, got, want)
		}
	}
}

// TestEncodeBodyTakesTheFastPath: the cases above would pass by always
// falling back to Marshal; these must not, and Marshal must indeed keep
// their data as it is.
func TestEncodeBodyTakesTheFastPath(t *testing.T) {
	for d, fast := range map[string]bool{
		`{"a":"b c"}`: true, `{"u":"\u003c\u0026"}`: true, `"\\"`: true, `{"e":"é☃"}`: true,
		`{"q":"\"<"}`: false, `{"a": 1}`: false, `"` + "\u2028" + `"`: false, `"\\" `: false, `{"k":"&"}`: false,
		"[1,\n2]": false, `{"x":"` + "\u2029" + `"}`: false, `"` + "\u20ac" + `"`: true,
	} {
		ev := session.Event{Type: session.TypeRequestContext, Seq: 1, Time: 2, Data: json.RawMessage(d)}
		spaced, err := ev.ValidateSpacing()
		if err != nil {
			t.Fatalf("%q: %v", d, err)
		}
		if got := !spaced && !escapable(ev.Data); got != fast {
			t.Errorf("%q: fast path %v, want %v", d, got, fast)
		}
		if fast {
			if m, err := json.Marshal(json.RawMessage(d)); err != nil || string(m) != d {
				t.Errorf("Marshal changes %q to %q (%v)", d, m, err)
			}
		}
	}
}

// FuzzEncodeBody: for any data the log accepts, the stored body is
// Marshal's.
func FuzzEncodeBody(f *testing.F) {
	for _, ev := range bodyCases() {
		f.Add(string(ev.Data), ev.Type, ev.Ignorable)
	}
	f.Fuzz(func(t *testing.T, data, typ string, ign bool) {
		ev := session.Event{Type: typ, Seq: 3, Time: 4, Data: json.RawMessage(data), Ignorable: ign}
		spaced, err := dataSpacing(ev.Data)
		if err != nil {
			return
		}
		want, werr := json.Marshal(ev)
		got, gerr := encodeBody(ev, !spaced)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("encodeBody = %s, %v; Marshal = %s, %v", got, gerr, want, werr)
		}
	})
}
