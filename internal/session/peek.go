package session

import (
	"bytes"
	"encoding/json"

	"github.com/dsh-dev/dsh/internal/llm"
)

// AssistantMeta is what the folds that never read the message itself
// (usage totals, context pressure, the surface's node seqs) take from an
// assistant/message payload.
type AssistantMeta struct {
	Turn  int
	Usage *llm.Usage
	// Empty reports a message without content: a seq anchor that is
	// not a node of the derived history.
	Empty bool
}

// PeekAssistant reads an assistant/message payload's turn, usage and
// whether its message is empty, without decoding the message: a resumed
// long session has thousands of them, and decoding each whole (with
// encoding/json, several times over) was most of what folding them
// cost. It gives what decoding the payload into [AssistantMessage] would
// (the same values and, for a payload that does not decode, an error):
// data in any layout but the plain one json.Marshal writes (escaped or
// case-folded keys, fractional numbers) goes through encoding/json.
func PeekAssistant(data json.RawMessage) (AssistantMeta, error) {
	if m, ok := peekAssistant(data); ok {
		return m, nil
	}
	return decodeAssistantMeta(data)
}

// decodeAssistantMeta is PeekAssistant's definition: encoding/json's
// reading of the payload.
func decodeAssistantMeta(data json.RawMessage) (AssistantMeta, error) {
	var p struct {
		Turn    int `json:"turn"`
		Message struct {
			Content []json.RawMessage `json:"content"`
		} `json:"message"`
		Usage *llm.Usage `json:"usage"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return AssistantMeta{}, err
	}
	return AssistantMeta{Turn: p.Turn, Usage: p.Usage, Empty: len(p.Message.Content) == 0}, nil
}

// peekAssistant is the fast path; ok is false when data must go through
// encoding/json.
func peekAssistant(data []byte) (m AssistantMeta, ok bool) {
	p := peeker{scanner{data: data}}
	if !p.objectStart() {
		return m, false
	}
	m.Empty = true
	for first := true; ; first = false {
		key, more, ok := p.nextKey(first)
		if !ok {
			return m, false
		}
		if !more {
			break
		}
		switch {
		case key == "turn":
			n, ok := p.integer()
			if !ok {
				return m, false
			}
			m.Turn = n
		case key == "message":
			empty, ok := p.messageEmpty()
			if !ok {
				return m, false
			}
			m.Empty = empty
		case key == "usage":
			raw, ok := p.skip()
			if !ok {
				return m, false
			}
			if !bytes.Equal(raw, []byte("null")) {
				u, ok := peekUsage(raw)
				if !ok {
					return m, false
				}
				m.Usage = &u
			}
		case foldsTo(key, "turn", "message", "usage"):
			// encoding/json matches keys case-insensitively.
			return m, false
		default:
			if _, ok := p.skip(); !ok {
				return m, false
			}
		}
	}
	p.ws()
	return m, p.i == len(p.data)
}

// usageKeys are llm.Usage's JSON keys, in field order.
var usageKeys = [...]string{"inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens", "reasoningTokens"}

// peekUsage reads a usage object of plain integers; anything else (ok
// false) goes through encoding/json.
func peekUsage(raw []byte) (u llm.Usage, ok bool) {
	p := peeker{scanner{data: raw}}
	if !p.objectStart() {
		return u, false
	}
	fields := [...]*int64{&u.InputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.OutputTokens, &u.ReasoningTokens}
	for first := true; ; first = false {
		key, more, ok := p.nextKey(first)
		if !ok {
			return u, false
		}
		if !more {
			p.ws()
			return u, p.i == len(p.data)
		}
		k := -1
		for i, name := range usageKeys {
			if key == name {
				k = i
			} else if foldsTo(key, name) {
				return u, false
			}
		}
		if k < 0 {
			if _, ok := p.skip(); !ok {
				return u, false
			}
			continue
		}
		n, ok := p.integer()
		if !ok {
			return u, false
		}
		*fields[k] = int64(n)
	}
}

// messageEmpty reads a message object and reports whether its content
// is absent, null or an empty array. Blocks in the content array must be
// objects (what decodes into llm.Block); anything else takes the slow
// path, which reports the decoding error.
func (p *peeker) messageEmpty() (empty, ok bool) {
	p.ws()
	if p.i < len(p.data) && p.data[p.i] == 'n' {
		_, ok := p.skip()
		return true, ok
	}
	if !p.objectStart() {
		return false, false
	}
	empty = true
	for first := true; ; first = false {
		key, more, ok := p.nextKey(first)
		if !ok {
			return false, false
		}
		if !more {
			return empty, true
		}
		switch {
		case key == "content":
			raw, ok := p.skip()
			if !ok {
				return false, false
			}
			e, ok := blocksEmpty(raw)
			if !ok {
				return false, false
			}
			empty = e
		case foldsTo(key, "content"):
			return false, false
		default:
			if _, ok := p.skip(); !ok {
				return false, false
			}
		}
	}
}

// blocksEmpty reports whether a content value holds no block; ok is
// false unless it is null or an array of objects.
func blocksEmpty(raw []byte) (empty, ok bool) {
	if bytes.Equal(raw, []byte("null")) {
		return true, true
	}
	p := peeker{scanner{data: raw}}
	if p.i >= len(p.data) || p.data[p.i] != '[' {
		return false, false
	}
	p.i++
	n := 0
	for {
		p.ws()
		if p.i >= len(p.data) {
			return false, false
		}
		if p.data[p.i] == ']' {
			return n == 0, true
		}
		if n > 0 {
			if p.data[p.i] != ',' {
				return false, false
			}
			p.i++
			p.ws()
		}
		if p.i >= len(p.data) || p.data[p.i] != '{' {
			return false, false
		}
		if _, ok := p.skip(); !ok {
			return false, false
		}
		n++
	}
}

func foldsTo(key string, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold([]byte(key), []byte(n)) {
			return true
		}
	}
	return false
}

// peeker walks JSON that is known to be valid (the log checked it at
// append and the store at load) without checking it again. Anything it
// does not expect makes it give up (ok false), never guess.
type peeker struct{ scanner }

func (p *peeker) objectStart() bool {
	p.ws()
	if p.i >= len(p.data) || p.data[p.i] != '{' {
		return false
	}
	p.i++
	return true
}

// nextKey reads the next key of an object and its colon; more is false
// at the closing brace. Keys with escapes are not read (ok false).
func (p *peeker) nextKey(first bool) (key string, more, ok bool) {
	p.ws()
	if p.i >= len(p.data) {
		return "", false, false
	}
	if p.data[p.i] == '}' {
		p.i++
		return "", false, true
	}
	if !first {
		if p.data[p.i] != ',' {
			return "", false, false
		}
		p.i++
		p.ws()
	}
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return "", false, false
	}
	end := bytes.IndexByte(p.data[p.i+1:], '"')
	if end < 0 {
		return "", false, false
	}
	raw := p.data[p.i+1 : p.i+1+end]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return "", false, false
	}
	p.i += end + 2
	p.ws()
	if p.i >= len(p.data) || p.data[p.i] != ':' {
		return "", false, false
	}
	p.i++
	p.ws()
	return string(raw), true, true
}

// integer reads a plain integer that fits an int.
func (p *peeker) integer() (int, bool) {
	raw, ok := p.skip()
	if !ok || len(raw) == 0 || len(raw) > 18 {
		return 0, false
	}
	n, neg := 0, raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	if len(raw) == 0 {
		return 0, false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// skip passes one value and returns its bytes.
func (p *peeker) skip() ([]byte, bool) {
	p.ws()
	if p.i >= len(p.data) {
		return nil, false
	}
	start := p.i
	switch p.data[p.i] {
	case '"':
		if !p.skipStr() {
			return nil, false
		}
	case '{', '[':
		depth := 0
		for p.i < len(p.data) {
			switch p.data[p.i] {
			case '"':
				if !p.skipStr() {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					p.i++
					return p.data[start:p.i], true
				}
			}
			p.i++
		}
		return nil, false
	default: // a literal or a number
		for p.i < len(p.data) {
			if c := p.data[p.i]; c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			p.i++
		}
		if p.i == start {
			return nil, false
		}
	}
	return p.data[start:p.i], true
}

// skipStr passes the string starting at p.i.
func (p *peeker) skipStr() bool {
	p.i++
	for {
		j := bytes.IndexAny(p.data[p.i:], `"\`)
		if j < 0 {
			return false
		}
		p.i += j
		if p.data[p.i] == '\\' {
			if p.i += 2; p.i > len(p.data) {
				return false
			}
			continue
		}
		p.i++
		return true
	}
}
