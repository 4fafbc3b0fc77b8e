package session

import (
	"encoding/json"
	"reflect"
	"testing"
)

// slowDecode is what a store did before DecodeStored: encoding/json,
// then Validate.
func slowDecode(body []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, err
	}
	return e, e.Validate()
}

var envelopeSeeds = []string{
	`{"type":"turn/start","seq":1,"time":1796141409261,"data":{"turn":1}}`,
	`{"type":"user/message","seq":4,"time":5,"data":{"id":"u","inboxRef":{"seq":0,"index":0}},"surfaceOp":"append"}`,
	`{"type":"user/message","seq":40,"time":5,"data":{"id":"c","role":"user","content":[{"type":"text","text":"s\u00e9\n"}]},"surfaceOp":{"op":"replace","start":0,"end":9},"sourceEventSeqs":[3,4,9]}`,
	`{"type":"x/future","seq":2,"time":3,"data":[1,2.5,true,null,"\ud83d\ude00"],"ignorable":true}`,
	`{"type":"x/future","seq":2,"time":3,"data":{}}`,                               // unknown, not ignorable
	`{"type":"turn/start","seq":2,"time":3,"data":{"a":1,"a":2}}`,                  // duplicate key
	`{"type":"turn/start","seq":2,"time":3,"data":{"a":"\xff"}}`,                   // invalid UTF-8
	`{"type":"user/message","seq":2,"time":3,"data":{}}`,                           // surface without op
	`{"type":"turn/start","seq":2,"time":3,"data":{},"surfaceOp":"append"}`,        // log-only with op
	`{"type":"turn/start","seq":2,"time":3,"data":{},"seq":7}`,                     // repeated member
	`{"type":"turn/start","seq":02,"time":3,"data":{}}`,                            // leading zero
	`{"type":"turn/start","seq":-0,"time":3,"data":{}}`,                            // negative zero
	`{"type":"turn/start","seq":1e2,"time":3,"data":{}}`,                           // exponent
	`{"type":"turn\/start","seq":2,"time":3,"data":{}}`,                            // escaped type
	`{"seq":2,"type":"turn/start","time":3,"data":{}}`,                             // other order
	`{"type":"turn/start","seq":2,"time":3,"data":{} }`,                            // whitespace
	`{"type":"turn/start","seq":2,"time":3,"data":{}`,                              // truncated
	`{"type":"turn/start","seq":2,"time":3,"data":{},"surfaceOp":"prepend"}`,       // bad op
	`{"type":"","seq":2,"time":3,"data":{}}`,                                       // no type
	`{"type":"turn/start","seq":2,"time":3,"data":{},"sourceEventSeqs":[1],"x":1}`, // unknown member
	`{"type":"turn/start","seq":9223372036854775808,"time":3,"data":{}}`,           // overflow
	`{"type":"assistant/chunk","seq":2,"time":3,"data":{"chunk":{"text":"a\"b"}}}`, // escaped quote in data
	`{"type":"turn/start","seq":2,"time":3,"data":"str"}`,                          // scalar data
	`{"type":"turn/start","seq":2,"time":3,"data":{},"ignorable":false,"surfaceOp":null}`,
}

// TestDecodeStoredSameAsJSON: where DecodeStored takes an envelope, it
// gives what encoding/json and Validate give, error or not.
func TestDecodeStoredSameAsJSON(t *testing.T) {
	fast := 0
	for _, s := range envelopeSeeds {
		if checkDecodeStored(t, []byte(s)) {
			fast++
		}
	}
	if fast < 8 {
		t.Errorf("only %d of the canonical envelopes took the fast path", fast)
	}
	// What the store writes takes the fast path.
	e := Event{Type: TypeUserMessage, Seq: 7, Time: 9, Data: json.RawMessage(`{"id":"u","content":[]}`), Ignorable: true,
		SurfaceOp: &SurfaceOp{Replace: true, Start: 1, End: 2}, SourceEventSeqs: []int64{5, 6}}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := DecodeStored(raw)
	if !ok || err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("DecodeStored(%s) = %+v, %v, %v", raw, got, ok, err)
	}
}

func checkDecodeStored(t *testing.T, body []byte) (fast bool) {
	t.Helper()
	got, ok, err := DecodeStored(body)
	if !ok {
		return false
	}
	want, werr := slowDecode(body)
	if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("%s: error %v, encoding/json gives %v", body, err, werr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %+v, encoding/json gives %+v", body, got, want)
	}
	return true
}

func FuzzDecodeStored(f *testing.F) {
	for _, s := range envelopeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecodeStored(t, body) })
}
