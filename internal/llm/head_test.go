package llm

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestHeadCoversRequest: every field of Request is a message, a header
// the body does not hold, or part of Head. A new field must be added to
// Head (or here, with why it is not encoded) before the adapters' head
// cache can be trusted.
func TestHeadCoversRequest(t *testing.T) {
	notInHead := map[string]bool{"Messages": true, "SessionID": true, "Purpose": true, "EncodeCache": true}
	inHead := map[string]bool{"Model": true, "System": true, "Tools": true, "Effort": true, "MaxTokens": true, "Temperature": true}
	for f := range reflect.TypeFor[Request]().Fields() {
		if !notInHead[f.Name] && !inHead[f.Name] {
			t.Errorf("Request.%s is neither in Head nor known to stay out of the encoded body", f.Name)
		}
	}
}

func TestHeadSame(t *testing.T) {
	temp := 0.5
	tools := []ToolSchema{{Name: "bash", Description: "run", Parameters: json.RawMessage(`{"type":"object"}`)}}
	base := Request{Model: "m", System: "s", Tools: tools, Effort: EffortHigh, MaxTokens: 10, Temperature: &temp,
		Messages: []Message{{ID: "x"}}, SessionID: "a", Purpose: "p"}
	h := HeadOf(base)
	other := base
	other.Messages, other.SessionID, other.Purpose = nil, "b", ""
	if !h.Same(base) || !h.Same(other) {
		t.Fatal("the same head is not recognised")
	}
	if (Head{}).Same(Request{}) {
		t.Error("the zero head matched")
	}
	t2 := 0.5
	for name, edit := range map[string]func(r *Request){
		"model":      func(r *Request) { r.Model = "n" },
		"system":     func(r *Request) { r.System = "" },
		"effort":     func(r *Request) { r.Effort = EffortOff },
		"max tokens": func(r *Request) { r.MaxTokens = 11 },
		"no temp":    func(r *Request) { r.Temperature = nil },
		"tool count": func(r *Request) { r.Tools = nil },
		"tool params": func(r *Request) {
			r.Tools = []ToolSchema{{Name: "bash", Description: "run", Parameters: json.RawMessage(`{}`)}}
		},
	} {
		r := base
		edit(&r)
		if h.Same(r) {
			t.Errorf("%s: a different head matched", name)
		}
	}
	// Equal values behind another pointer match; a value changed in
	// place behind the same pointer does not.
	r := base
	r.Temperature = &t2
	if !h.Same(r) {
		t.Error("an equal temperature behind another pointer did not match")
	}
	temp = 0.7
	if h.Same(base) {
		t.Error("a temperature changed in place matched")
	}
	tools[0].Description = "changed" // the caller's slice, reused
	temp = 0.5
	if h.Same(base) {
		t.Error("a tool changed in the caller's slice matched")
	}
}
