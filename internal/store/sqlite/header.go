package sqlite

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/session"
)

// parseHeader decodes a stored header without reflection, for listings,
// which decode one per session: encoding/json costs about as much as
// SQLite reading the row. It reads exactly what json.Marshal writes for a
// [session.Header]: one flat object of its known keys, strings without
// escapes, integers. ok is false for anything else (an escape, an unknown
// key, a float, bad JSON), and the caller decodes with encoding/json,
// which then also gives the error; where ok is true the result is what
// json.Unmarshal gives.
func parseHeader(b []byte) (h session.Header, ok bool) {
	p := headerParser{b: b}
	if !p.byte('{') {
		return h, false
	}
	if p.byte('}') {
		return h, p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return h, false
		}
		switch string(key) {
		case "version":
			ok = p.int(&h.Version)
		case "id":
			h.ID, ok = p.text()
		case "createdAt":
			ok = p.int64(&h.CreatedAt)
		case "cwd":
			h.Cwd, ok = p.text()
		case "parentSession":
			h.ParentSession, ok = p.text()
		case "seedLength":
			var n int64
			if ok = p.int64(&n); ok {
				h.SeedLength = &n
			}
		case "origin":
			h.Origin, ok = p.text()
		case "delegationDepth":
			ok = p.int(&h.DelegationDepth)
		case "agentPreset":
			h.AgentPreset, ok = p.text()
		default:
			return h, false
		}
		if !ok {
			return h, false
		}
		if p.byte('}') {
			return h, p.end()
		}
		if !p.byte(',') {
			return h, false
		}
	}
}

type headerParser struct {
	b []byte
	i int
}

func (p *headerParser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// byte consumes c (after white space) if it comes next.
func (p *headerParser) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *headerParser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// str reads a string without escapes, control characters or invalid
// UTF-8 (json.Unmarshal would rewrite those), returning its bytes.
func (p *headerParser) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	n := bytes.IndexByte(p.b[p.i:], '"')
	if n < 0 {
		return nil, false
	}
	s := p.b[p.i : p.i+n]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return nil, false
		}
	}
	if !utf8.Valid(s) {
		return nil, false
	}
	p.i += n + 1
	return s, true
}

func (p *headerParser) text() (string, bool) {
	s, ok := p.str()
	return string(s), ok
}

// int64 reads an integer in JSON's syntax (no leading zeros, no
// fraction or exponent) that fits.
func (p *headerParser) int64(dst *int64) bool {
	p.space()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	*dst = n
	return err == nil
}

func (p *headerParser) int(dst *int) bool {
	var n int64
	if !p.int64(&n) || n != int64(int(n)) {
		return false
	}
	*dst = int(n)
	return true
}
