package lsp

import (
	"encoding/json"
	"testing"
)

func TestDecodeLocations(t *testing.T) {
	for in, want := range map[string][]Location{
		`null`: nil,
		`[]`:   {},
		`{"uri":"file:///a/b%20c.go","range":{"start":{"line":1,"character":2},"end":{"line":1,"character":3}}}`:                                    {{Path: "/a/b c.go", Pos: Pos{1, 2}}},
		`[{"targetUri":"file:///x.go","targetRange":{"start":{"line":0,"character":0}},"targetSelectionRange":{"start":{"line":4,"character":5}}}]`: {{Path: "/x.go", Pos: Pos{4, 5}}},
	} {
		got, err := decodeLocations(json.RawMessage(in))
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %v, %v", in, got, err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", in, got, want)
			}
		}
	}
	for _, bad := range []string{`"x"`, `[1]`, `[{"range":{}}]`, `{"uri":"https://x/y"}`, `{"uri":"%zz"}`} {
		if _, err := decodeLocations(json.RawMessage(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

func TestDecodeHover(t *testing.T) {
	for in, want := range map[string]string{
		`null`:                 "",
		`{"contents":null}`:    "",
		`{"contents":"plain"}`: "plain",
		`{"contents":{"kind":"markdown","value":"**b**"}}`:        "**b**",
		`{"contents":[{"language":"go","value":"func F()"},"d"]}`: "```go\nfunc F()\n```\n\nd",
	} {
		if got, err := decodeHover(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`[]`, `{"contents":5}`, `{"contents":[5]}`} {
		if _, err := decodeHover(json.RawMessage(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

func TestFileURIRoundTrip(t *testing.T) {
	for _, p := range []string{"/a/b.go", "/tmp/ü 𝔘/x#y?.go"} {
		got, err := URIPath(FileURI(p))
		if err != nil || got != p {
			t.Errorf("%s → %s → %s, %v", p, FileURI(p), got, err)
		}
	}
}
