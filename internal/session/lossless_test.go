package session

import (
	"encoding/json"
	"strings"
	"testing"
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
