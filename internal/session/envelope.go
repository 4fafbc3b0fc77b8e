package session

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// DecodeStored decodes and validates an envelope as json.Marshal writes
// it ({"type":…,"seq":…,"time":…,"data":…, then the optional members in
// field order}), as a store keeps every event, in one pass: the data is
// checked lossless by the same scan that finds its end, and Data aliases
// body rather than copying it (the caller must not modify body). ok is
// false for any other layout (another member order, escapes in the
// type, whitespace), which the caller decodes with encoding/json; an
// envelope in the canonical layout that is invalid gives an error, the
// same check [Event.Validate] makes.
func DecodeStored(body []byte) (e Event, ok bool, err error) {
	rest, ok := bytes.CutPrefix(body, []byte(`{"type":"`))
	if !ok {
		return Event{}, false, nil
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return Event{}, false, nil
	}
	for _, c := range rest[:end] {
		// Types are printable ASCII; escapes, control characters and
		// UTF-8 (which encoding/json may replace) go the usual way.
		if c < 0x20 || c > 0x7e || c == '\\' {
			return Event{}, false, nil
		}
	}
	typ := rest[:end]
	rest = rest[end+1:]
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"seq":`)); !ok {
		return Event{}, false, nil
	}
	if e.Seq, rest, ok = cutInt(rest); !ok {
		return Event{}, false, nil
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"time":`)); !ok {
		return Event{}, false, nil
	}
	if e.Time, rest, ok = cutInt(rest); !ok {
		return Event{}, false, nil
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"data":`)); !ok {
		return Event{}, false, nil
	}
	s := scanner{data: rest}
	if err := s.value(0); err != nil {
		// Not lossless, or not JSON at all: let encoding/json say which.
		return Event{}, false, nil
	}
	e.Data = json.RawMessage(rest[:s.i:s.i])
	rest = rest[s.i:]
	if tail, ok := cutCommonOptional(&e, rest); ok {
		rest = tail
	}
	if len(rest) != 1 || rest[0] != '}' {
		// Other optional members follow: few and small, decoded the
		// usual way.
		var opt struct {
			Ignorable       bool       `json:"ignorable"`
			SurfaceOp       *SurfaceOp `json:"surfaceOp"`
			SourceEventSeqs []int64    `json:"sourceEventSeqs"`
		}
		if len(rest) < 3 || rest[0] != ',' || rest[1] != '"' {
			return Event{}, false, nil
		}
		// Strict, so that a repeated envelope member (which encoding/json
		// would take the last of) goes the usual way.
		obj := append([]byte{'{'}, rest[1:]...)
		dec := json.NewDecoder(bytes.NewReader(obj))
		dec.DisallowUnknownFields()
		if dec.Decode(&opt) != nil || dec.InputOffset() != int64(len(obj)) {
			return Event{}, false, nil
		}
		e.Ignorable, e.SurfaceOp, e.SourceEventSeqs = opt.Ignorable, opt.SurfaceOp, opt.SourceEventSeqs
	}
	e.Type = internedType(typ)
	if err := e.validateEnvelope(); err != nil {
		return Event{}, true, err
	}
	return e, true, nil
}

// cutCommonOptional parses the optional members most events carry,
// "surfaceOp":"append" and "sourceEventSeqs":[…] (in field order, no
// ignorable), into e; ok is false, with e unchanged, when rest holds
// anything else before the closing brace.
func cutCommonOptional(e *Event, rest []byte) (tail []byte, ok bool) {
	var op *SurfaceOp
	if r, found := bytes.CutPrefix(rest, []byte(`,"surfaceOp":"append"`)); found {
		op, rest = Append, r
	}
	var seqs []int64
	if r, found := bytes.CutPrefix(rest, []byte(`,"sourceEventSeqs":[`)); found {
		seqs = []int64{}
		for len(r) > 0 && r[0] != ']' {
			if len(seqs) > 0 {
				if r[0] != ',' {
					return nil, false
				}
				r = r[1:]
			}
			v, after, ok := cutInt(r)
			if !ok {
				return nil, false
			}
			seqs, r = append(seqs, v), after
		}
		if len(r) == 0 {
			return nil, false
		}
		rest = r[1:]
	}
	if len(rest) != 1 || rest[0] != '}' {
		return nil, false
	}
	e.SurfaceOp, e.SourceEventSeqs = op, seqs
	return rest, true
}

// cutInt parses the JSON integer at the start of b.
func cutInt(b []byte) (int64, []byte, bool) {
	n := 0
	if n < len(b) && b[n] == '-' {
		n++
	}
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	v, err := strconv.ParseInt(string(b[:n]), 10, 64)
	if err != nil || (n > 1 && b[0] == '0') || (n > 2 && b[0] == '-' && b[1] == '0') {
		return 0, nil, false
	}
	return v, b[n:], true
}

// internedType returns the known type's string for b without allocating,
// else a new one.
func internedType(b []byte) string {
	if t, ok := typeNames[string(b)]; ok {
		return t
	}
	return string(b)
}

// typeNames maps every known event type to itself, for internedType.
var typeNames = func() map[string]string {
	m := make(map[string]string, len(knownTypes))
	for t := range knownTypes {
		m[t] = t
	}
	return m
}()
