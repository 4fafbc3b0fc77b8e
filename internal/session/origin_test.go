package session

import (
	"encoding/json"
	"strings"
	"testing"
)

// An old header (origin a string, or none) loads and writes back the same
// bytes; an automated session's origin is an object with its kind.
func TestHeaderOrigin(t *testing.T) {
	for _, in := range []string{
		`{"version":0,"id":"a","createdAt":1,"cwd":"/x","delegationDepth":0}`,
		`{"version":0,"id":"a","createdAt":1,"cwd":"/x","parentSession":"p","origin":"subagent","delegationDepth":1,"agentPreset":"standard"}`,
	} {
		var h Header
		if err := json.Unmarshal([]byte(in), &h); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(h)
		if err != nil || string(out) != in {
			t.Errorf("round trip\n got %s (%v)\nwant %s", out, err, in)
		}
	}
	h := Header{ID: "b", Cwd: "/y", Origin: "schedule", OriginInfo: &OriginInfo{ID: "s1", FireTime: "2026-03-29T09:00:00+02:00"}}
	out, err := json.Marshal(h)
	if err != nil || !strings.Contains(string(out), `"origin":{"kind":"schedule","id":"s1","fireTime":"2026-03-29T09:00:00+02:00"}`) {
		t.Fatalf("marshal %s %v", out, err)
	}
	var back Header
	if err := json.Unmarshal(out, &back); err != nil || back.Origin != "schedule" || back.OriginInfo == nil || *back.OriginInfo != *h.OriginInfo {
		t.Fatalf("unmarshal %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"id":"c","origin":[1]}`), &back); err == nil {
		t.Error("an origin array was accepted")
	}
}
