package sqlite

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/dsh-dev/dsh/internal/session"
)

// encodeBody returns the stored body of ev: exactly json.Marshal(ev)'s
// bytes, written without reflection when ev's data is already what
// Marshal would make of it. Marshal compacts a json.RawMessage and
// escapes <, > and & (and U+2028, U+2029) in it; the log's payloads come
// from Marshal and are neither spaced nor unescaped, so the pass over
// them (a third of the time of appending a ~40 KB request header) only
// copied. compact says ev.Data is valid JSON without whitespace between
// tokens ([session.Event.ValidateSpacing] found none); otherwise, and
// for data Marshal would escape, it goes through Marshal.
func encodeBody(ev session.Event, compact bool) ([]byte, error) {
	if !compact || !plainType(ev.Type) || escapable(ev.Data) {
		return json.Marshal(ev)
	}
	b := make([]byte, 0, len(ev.Data)+len(ev.Type)+64+8*len(ev.SourceEventSeqs))
	b = append(b, `{"type":"`...)
	b = append(b, ev.Type...)
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, ev.Seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, ev.Time, 10)
	b = append(b, `,"data":`...)
	b = append(b, ev.Data...)
	if ev.Ignorable {
		b = append(b, `,"ignorable":true`...)
	}
	if ev.SurfaceOp != nil {
		op, err := json.Marshal(ev.SurfaceOp)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"surfaceOp":`...)
		b = append(b, op...)
	}
	if len(ev.SourceEventSeqs) > 0 {
		b = append(b, `,"sourceEventSeqs":[`...)
		for i, s := range ev.SourceEventSeqs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, s, 10)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// plainType reports whether t is quoted by Marshal as itself between
// quotes: event types are short ASCII names.
func plainType(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// escapable reports whether data holds a byte sequence Marshal escapes
// even in a compact value: <, >, &, U+2028 or U+2029. IndexByte is
// vectorised, so the common answer (none) costs a fraction of a scan.
func escapable(data []byte) bool {
	if bytes.IndexByte(data, '<') >= 0 || bytes.IndexByte(data, '>') >= 0 || bytes.IndexByte(data, '&') >= 0 {
		return true
	}
	for rest := data; ; {
		i := bytes.IndexByte(rest, 0xE2)
		if i < 0 || i+2 >= len(rest) {
			return false
		}
		if rest[i+1] == 0x80 && (rest[i+2] == 0xA8 || rest[i+2] == 0xA9) {
			return true
		}
		rest = rest[i+1:]
	}
}
