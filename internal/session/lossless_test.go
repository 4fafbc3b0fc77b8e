package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

func TestCheckLosslessCases(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`0`, true}, {`-1.5e+10`, true}, {`"x"`, true}, {`true`, true}, {`null`, true},
		{` [ 1 , {"a" : [] } ] `, true},
		{`{"a":"\u0061\n\"","b":"\ud83d\ude00"}`, true},
		{`{"a":1,"\u0061":2}`, false},
		{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"k16":0,"k3":1}`, false},
		{`"\ud83d"`, false},
		{`"\ude00"`, false},
		{`"\ud83d\ud83d"`, false}, {`"\ud83dx"`, false}, {`"\ud83d\u12"`, false}, {`"\ud83d\n"`, false},
		{`"a\uD83D\uDE00b\u00e9"`, true}, {`"\ud83d\ude00\ude00"`, false}, {`"\udbff\udfff"`, true},
		{`{"\ud83d":1}`, false}, {`"\ud7ff\ue000"`, true},
		{"\"\xff\"", false},
		{"\"a\tb\"", false},
		{`01`, false}, {`1.`, false}, {`.5`, false}, {`1e`, false}, {`-`, false},
		{`[1,]`, false}, {`{"a":1,}`, false}, {`{"a"}`, false}, {`{a:1}`, false},
		{`tru`, false}, {`"abc`, false}, {`"\x"`, false}, {`"\u12"`, false},
		{`[` + strings.Repeat(`[`, 1001) + strings.Repeat(`]`, 1002), false},
	} {
		if err := CheckLossless([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("CheckLossless(%.40q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

// FuzzCheckLossless: whatever CheckLossless accepts must be valid JSON
// that re-encodes to the same value, and valid JSON without duplicates or
// bad UTF-8 must be accepted.
func FuzzCheckLossless(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x",null]}`, `{"a":1,"a":2}`, `"\ud83d\ude00"`, `[-0.5e3]`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckLossless(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("accepted %q that does not decode: %v", b, err)
		}
		if strings.ContainsRune(string(mustMarshal(t, v)), '\uFFFD') && !strings.Contains(string(b), "\uFFFD") && !strings.Contains(strings.ToLower(string(b)), `\ufffd`) {
			t.Fatalf("accepted %q that decodes lossily", b)
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func BenchmarkCheckLossless(b *testing.B) {
	data := []byte(`{"turn":3,"step":2,"chunk":{"type":"text-delta","index":1,"text":"hello, \"world\" \u00e9"}}`)
	b.SetBytes(int64(len(data)))
	for range b.N {
		if err := CheckLossless(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestValidateSpacing: whitespace between tokens is reported, anywhere,
// and whitespace inside strings is not.
func TestValidateSpacing(t *testing.T) {
	for d, want := range map[string]bool{
		`{"a":"b c"}`: false, `["  "]`: false, `{"a":1}`: false, `1`: false,
		`{ "a":1}`: true, `[1, 2]`: true, ` 1`: true, "1\n": true, `{"a":{"b" :2}}`: true,
	} {
		got, err := Event{Type: TypeRequestContext, Data: []byte(d)}.ValidateSpacing()
		if err != nil || got != want {
			t.Errorf("ValidateSpacing(%q) = %v, %v; want %v", d, got, err, want)
		}
	}
	if _, err := (Event{Type: TypeRequestContext, Data: []byte(`{"a":1,"a":2}`)}).ValidateSpacing(); err == nil {
		t.Error("a duplicate key passed")
	}
}

// BenchmarkCheckLosslessHeader checks a ~40 KB request header like the
// one every new session logs before its first request: a system prompt
// and tool schemas, long strings with escapes.
func BenchmarkCheckLosslessHeader(b *testing.B) {
	para := strings.Repeat("Run a shell command in the workspace; prefer <rg> over \"grep\" & keep output short.\n", 10)
	h := RequestHeaderData{System: strings.Repeat(para, 8)}
	for i := range 30 {
		h.Tools = append(h.Tools, llm.ToolSchema{Name: fmt.Sprint("tool_", i), Description: para,
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"A path, absolute or relative to the working directory."},"limit":{"type":"integer","minimum":1}},"required":["path"]}`)})
	}
	data, err := json.Marshal(h)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := CheckLossless(data); err != nil {
			b.Fatal(err)
		}
	}
}
