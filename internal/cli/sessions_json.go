package cli

import (
	"bufio"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/session"
)

// writeListedJSON writes list exactly as an Encoder with a two-space
// indent writes it, without reflection: for 10,000 sessions
// encoding/json took as long as reading them from the store. A test
// compares the two on values with every field set, so a field added to
// ListedSession or session.Header that this does not write fails it.
func writeListedJSON(w io.Writer, list []ListedSession) error {
	if len(list) == 0 {
		_, err := io.WriteString(w, "[]\n")
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var b []byte
	for i := range list {
		b = b[:0]
		if i == 0 {
			b = append(b, "[\n"...)
		} else {
			b = append(b, ",\n"...)
		}
		b = appendListed(b, &list[i])
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	if _, err := bw.WriteString("\n]\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// appendListed appends l as one element of an indented array.
func appendListed(b []byte, l *ListedSession) []byte {
	h := &l.Header
	b = append(b, "  {\n"...)
	b = appendInt(b, "version", int64(h.Version), false)
	b = appendStr(b, "id", h.ID)
	b = appendInt(b, "createdAt", h.CreatedAt, true)
	b = appendStr(b, "cwd", h.Cwd)
	if h.ParentSession != "" {
		b = appendStr(b, "parentSession", h.ParentSession)
	}
	if h.SeedLength != nil {
		b = appendInt(b, "seedLength", *h.SeedLength, true)
	}
	switch {
	case h.OriginInfo != nil:
		b = appendOrigin(b, h.Origin, h.OriginInfo)
	case h.Origin != "":
		b = appendStr(b, "origin", h.Origin)
	}
	b = appendInt(b, "delegationDepth", int64(h.DelegationDepth), true)
	if h.AgentPreset != "" {
		b = appendStr(b, "agentPreset", h.AgentPreset)
	}
	b = appendStr(b, "shortId", l.ShortID)
	b = appendStr(b, "title", l.Title)
	b = appendInt(b, "updatedAt", l.UpdatedAt, true)
	b = appendInt(b, "turns", l.Turns, true)
	b = appendInt(b, "events", l.Events, true)
	b = appendStr(b, "status", l.Status)
	return append(b, "\n  }"...)
}

// appendOrigin writes an automated session's origin object as the
// indenting Encoder writes session.Header's: {"kind", then OriginInfo's
// fields that are set}.
func appendOrigin(b []byte, kind string, o *session.OriginInfo) []byte {
	b = append(appendKey(b, "origin", true), "{\n"...)
	field := func(key string, first bool) {
		if !first {
			b = append(b, ",\n"...)
		}
		b = append(b, `      "`...)
		b = append(b, key...)
		b = append(b, `": `...)
	}
	field("kind", true)
	b = appendJSONString(b, kind)
	for _, kv := range [][2]string{{"id", o.ID}, {"fireTime", o.FireTime}, {"delivery", o.Delivery}, {"repo", o.Repo}} {
		if kv[1] != "" {
			field(kv[0], false)
			b = appendJSONString(b, kv[1])
		}
	}
	if o.PR != 0 {
		field("pr", false)
		b = strconv.AppendInt(b, int64(o.PR), 10)
	}
	return append(b, "\n    }"...)
}

func appendKey(b []byte, key string, comma bool) []byte {
	if comma {
		b = append(b, ",\n"...)
	}
	b = append(b, `    "`...)
	b = append(b, key...)
	return append(b, `": `...)
}

func appendInt(b []byte, key string, n int64, comma bool) []byte {
	return strconv.AppendInt(appendKey(b, key, comma), n, 10)
}

func appendStr(b []byte, key, s string) []byte {
	return appendJSONString(appendKey(b, key, true), s)
}

// appendJSONString quotes s as encoding/json does by default: HTML
// characters, U+2028 and U+2029 escaped; invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
