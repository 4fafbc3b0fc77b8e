package sqlite

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

// headerSeeds are stored headers as dsh writes them, and spellings it
// does not write.
func headerSeeds() []string {
	seed := int64(12)
	var out []string
	for _, h := range []session.Header{
		{Version: session.FormatVersion, ID: "019a-x", CreatedAt: 1_700_000_000_000, Cwd: "/work/project"},
		{Version: session.FormatVersion, ID: "c", CreatedAt: 1, Cwd: "/work/ünïcode dir", ParentSession: "p", SeedLength: &seed,
			Origin: "subagent", DelegationDepth: 2, AgentPreset: "explore"},
		{Version: session.FormatVersion, ID: "q", Cwd: `/work/"quoted"\back`, ParentSession: "p\tq"},
		{Version: -1, ID: "<&>", CreatedAt: -5},
	} {
		b, _ := json.Marshal(h)
		out = append(out, string(b))
	}
	return append(out, `{}`, ` { "id" : "a" , "version" : 1 } `, `{"id":"a","extra":1}`, `{"version":1.0}`,
		`{"version":01}`, `{"version":1e2}`, `{"createdAt":99999999999999999999}`, `{"id":"a"`, `{"id":"a"}x`,
		`{"seedLength":null}`, `{"id":"\u0041"}`, "{\"id\":\"\xff\"}", `[]`, `{"id":1}`, `{"version":-}`, `{"id":"a",}`,
		`{"version":1,"version":2}`, `{"delegationDepth":-0}`)
}

// TestParseHeader: the fast path decodes every header dsh writes, and
// where it decodes anything it agrees with encoding/json.
func TestParseHeader(t *testing.T) {
	for i, s := range headerSeeds() {
		h, ok := parseHeader([]byte(s))
		if i < 2 && !ok { // the others need the escapes encoding/json reads
			t.Errorf("%s: not decoded by the fast path", s)
		}
		checkParseHeader(t, s, h, ok)
	}
}

func checkParseHeader(t *testing.T, s string, h session.Header, ok bool) {
	t.Helper()
	if !ok {
		return
	}
	var want session.Header
	if err := json.Unmarshal([]byte(s), &want); err != nil {
		t.Fatalf("%q: fast path decoded %+v, encoding/json fails: %v", s, h, err)
	}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("%q: fast path %+v, encoding/json %+v", s, h, want)
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, ok := parseHeader([]byte(s))
		checkParseHeader(t, s, h, ok)
	})
}
