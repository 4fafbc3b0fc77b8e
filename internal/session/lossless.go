package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// CheckLossless verifies that data is exactly one valid JSON value that
// decodes without losing anything: no duplicate object keys (a decoder
// keeps only one of them) and no invalid UTF-8 in strings (a decoder
// replaces it). It is a single pass over the bytes with no allocation for
// typical payloads, because every stored event goes through it.
func CheckLossless(data []byte) error {
	_, err := checkLossless(data)
	return err
}

// checkLossless is CheckLossless that also reports whether data has
// whitespace between its tokens, which json.Marshal removes: the store
// writes data without it as it is (sqlite's encodeBody).
func checkLossless(data []byte) (spaced bool, err error) {
	if len(data) == 0 {
		return false, errors.New("data is empty")
	}
	s := scanner{data: data}
	s.ws()
	if err := s.value(0); err != nil {
		return false, fmt.Errorf("data is not lossless JSON: %w", err)
	}
	s.ws()
	if s.i != len(s.data) {
		return false, fmt.Errorf("data is not lossless JSON: trailing content at offset %d", s.i)
	}
	return s.spaced, nil
}

const maxDepth = 1000

type scanner struct {
	data []byte
	i    int
	// spaced is set once whitespace between tokens was skipped.
	spaced bool
}

func (s *scanner) errf(format string, args ...any) error {
	return fmt.Errorf("offset %d: "+format, append([]any{s.i}, args...)...)
}

func (s *scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			s.spaced = true
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if depth > maxDepth {
		return s.errf("nesting deeper than %d", maxDepth)
	}
	if s.i >= len(s.data) {
		return s.errf("unexpected end of input")
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, err := s.str(false)
		return err
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.errf("unexpected %q", c)
	}
}

func (s *scanner) lit(word string) error {
	if len(s.data)-s.i < len(word) || string(s.data[s.i:s.i+len(word)]) != word {
		return s.errf("invalid literal")
	}
	s.i += len(word)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() error {
	start := s.i
	if err := s.numberSyntax(); err != nil {
		return err
	}
	// A number no float64 can hold would fail to decode anywhere but here.
	if _, err := strconv.ParseFloat(string(s.data[start:s.i]), 64); err != nil {
		return s.errf("number out of range")
	}
	return nil
}

func (s *scanner) numberSyntax() error {
	if s.data[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.data) && s.data[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.errf("invalid number")
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.errf("invalid number fraction")
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.errf("invalid number exponent")
		}
	}
	return nil
}

// str scans a string and, when key is set, returns its contents with
// any escapes decoded (an object key, compared for duplicates). A value's
// contents are only checked: the escapes' syntax, control characters,
// UTF-8 and surrogates are what a decoder could reject or replace, and
// decoding them too was most of what checking a log's payloads cost.
func (s *scanner) str(key bool) ([]byte, error) {
	s.i++ // opening quote
	start := s.i
	escaped := false
	for s.i < len(s.data) {
		// Most of a string is plain bytes: skip them in a tight loop
		// (UTF-8 is checked over the whole string at its end).
		for s.i < len(s.data) && plainStr[s.data[s.i]] {
			s.i++
		}
		if s.i >= len(s.data) {
			break
		}
		c := s.data[s.i]
		switch {
		case c == '"':
			raw := s.data[start:s.i]
			s.i++
			if !escaped {
				if !utf8.Valid(raw) {
					return nil, s.errf("invalid UTF-8 in string")
				}
				return raw, nil
			}
			if !utf8.Valid(raw) {
				return nil, s.errf("invalid UTF-8 in string")
			}
			if !key {
				return nil, nil
			}
			// Decode escapes so that "a" and "\u0061" compare equal.
			var out string
			if err := json.Unmarshal(s.data[start-1:s.i], &out); err != nil {
				return nil, s.errf("invalid string: %v", err)
			}
			return []byte(out), nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.data) {
				return nil, s.errf("unterminated escape")
			}
			switch s.data[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+4 >= len(s.data) || !isHex4(s.data[s.i+1:s.i+5]) {
					return nil, s.errf("invalid \\u escape")
				}
				// A lone UTF-16 surrogate is silently replaced with U+FFFD
				// by a decoder: a high one must be followed by a low one.
				switch r := hex4(s.data[s.i+1 : s.i+5]); {
				case r >= 0xD800 && r < 0xDC00:
					lo := s.i + 5
					if lo+5 >= len(s.data) || s.data[lo] != '\\' || s.data[lo+1] != 'u' || !isHex4(s.data[lo+2:lo+6]) {
						return nil, s.errf("invalid UTF-8 in string")
					}
					if r2 := hex4(s.data[lo+2 : lo+6]); r2 < 0xDC00 || r2 >= 0xE000 {
						return nil, s.errf("invalid UTF-8 in string")
					}
					s.i = lo + 6
				case r >= 0xDC00 && r < 0xE000:
					return nil, s.errf("invalid UTF-8 in string")
				default:
					s.i += 5
				}
			default:
				return nil, s.errf("invalid escape")
			}
		case c < 0x20:
			return nil, s.errf("control character in string")
		default:
			s.i++
		}
	}
	return nil, s.errf("unterminated string")
}

// plainStr marks the bytes a string's scan passes over without a look:
// all but the closing quote, a backslash and control characters.
var plainStr = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// hex4 decodes four hex digits (isHex4 checked them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		default:
			r |= rune(c-'A') + 10
		}
	}
	return r
}

func (s *scanner) array(depth int) error {
	s.i++
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.data) {
			return s.errf("unterminated array")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.errf("expected , or ] in array")
		}
	}
}

func (s *scanner) object(depth int) error {
	s.i++
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	// Small objects compare keys linearly; large ones switch to a map.
	var small [16][]byte
	keys := small[:0]
	var seen map[string]bool
	for {
		s.ws()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return s.errf("expected object key")
		}
		key, err := s.str(true)
		if err != nil {
			return err
		}
		if seen == nil && len(keys) < len(small) {
			for _, k := range keys {
				if bytes.Equal(k, key) {
					return s.errf("duplicate key %q", key)
				}
			}
			keys = append(keys, key)
		} else {
			if seen == nil {
				seen = make(map[string]bool, 32)
				for _, k := range keys {
					seen[string(k)] = true
				}
			}
			if seen[string(key)] {
				return s.errf("duplicate key %q", key)
			}
			seen[string(key)] = true
		}
		s.ws()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.errf("expected : after object key")
		}
		s.i++
		s.ws()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.data) {
			return s.errf("unterminated object")
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errf("expected , or } in object")
		}
	}
}
