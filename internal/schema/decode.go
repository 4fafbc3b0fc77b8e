package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// object is a decoded JSON object in document order. A map would lose
// duplicate keys silently; keeping the pairs lets the decoder refuse them
// and keeps compile errors deterministic.
type object []member

type member struct {
	key string
	val any
}

func (o object) get(k string) (any, bool) {
	for _, m := range o {
		if m.key == k {
			return m.val, true
		}
	}
	return nil, false
}

// decode parses exactly one JSON value: objects become object, arrays
// []any, numbers json.Number, and the rest their usual Go types. It
// refuses duplicate object keys and invalid UTF-8, both of which a
// standard decoder would accept while changing the value (keeping one of
// the keys, replacing the bytes), so that what is validated is exactly
// what was sent.
func decode(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the value")
	}
	return v, nil
}

// maxDepth bounds value nesting: the decoder recurses per level, and a
// goroutine stack overflow is fatal rather than recoverable.
const maxDepth = 1000

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of input")
		}
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		var obj object
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string) // the decoder only yields string keys here
			if _, dup := obj.get(k); dup {
				return nil, fmt.Errorf("duplicate object key %q", k)
			}
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj = append(obj, member{k, v})
		}
		if _, err := dec.Token(); err != nil { // '}'
			return nil, err
		}
		if obj == nil {
			obj = object{}
		}
		return obj, nil
	case '[':
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, err
		}
		return list, nil
	}
	return nil, fmt.Errorf("unexpected %q", d)
}

// equal is JSON equality: numbers by value, objects regardless of key
// order.
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, okx := toFloat(x)
		fy, oky := toFloat(y)
		if !okx || !oky {
			return x == y
		}
		return fx.Cmp(fy) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case object:
		y, ok := b.(object)
		if !ok || len(x) != len(y) {
			return false
		}
		for _, m := range x {
			other, ok := y.get(m.key)
			if !ok || !equal(m.val, other) {
				return false
			}
		}
		return true
	}
	return false
}

// render writes v back as compact JSON for messages.
func render(v any) string {
	var b bytes.Buffer
	writeJSON(&b, v)
	return b.String()
}

func writeJSON(b *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool, string:
		enc, _ := json.Marshal(t)
		b.Write(enc)
	case json.Number:
		b.WriteString(string(t))
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	case object:
		b.WriteByte('{')
		for i, m := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			enc, _ := json.Marshal(m.key)
			b.Write(enc)
			b.WriteByte(':')
			writeJSON(b, m.val)
		}
		b.WriteByte('}')
	}
}
