package session

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
)

// TypeTitle is session/title: the record of a model call that named the
// session, with its request and its result (the title, or the failure).
// Sessions without one are titled from their first prompt
// ([PromptTitle]), which the log already holds.
const TypeTitle = "session/title"

// TitleMaxRunes is the length a prompt-derived title is cut to.
const TitleMaxRunes = 60

// Title is the payload of session/title. It is written once the call has
// ended, so it always carries both sides of the call. Title is empty when
// the call failed (Error is set) or returned nothing usable; the session
// then keeps its prompt-derived title.
type Title struct {
	Title    string       `json:"title,omitempty"`
	Provider string       `json:"provider"`
	Model    string       `json:"model"`
	Request  llm.Request  `json:"request"`
	Response string       `json:"response,omitempty"`
	Usage    *llm.Usage   `json:"usage,omitempty"`
	Error    *llm.Failure `json:"error,omitempty"`
}

// PromptTitle derives a title from a prompt: its first non-blank line,
// whitespace collapsed and control characters dropped, cut to about
// [TitleMaxRunes] characters on a word boundary (with "…" when cut). It
// returns "" for a blank prompt.
func PromptTitle(prompt string) string {
	var line string
	for l := range strings.Lines(prompt) {
		if line = strings.Join(strings.Fields(strings.Map(printable, l)), " "); line != "" {
			break
		}
	}
	return cutTitle(line)
}

// printable drops the control characters (terminal escapes among them)
// and bidirectional overrides that would let a title rewrite the
// terminal or the table it is listed in; tabs become spaces.
func printable(r rune) rune {
	switch {
	case r == '\t' || r == '\n':
		return r
	case unicode.IsControl(r), r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return -1
	}
	return r
}

// CleanTitle normalizes a title a model proposed: the first non-blank
// line, whitespace collapsed, surrounding quotes and a trailing period
// dropped, cut like [PromptTitle].
func CleanTitle(s string) string {
	t := PromptTitle(s)
	t = strings.TrimSuffix(t, "…")
	t = strings.TrimSuffix(t, ".")
	t = strings.Trim(t, "\"'`*“”‘’ ")
	t = strings.TrimSuffix(t, ".")
	return cutTitle(strings.TrimSpace(t))
}

// cutTitle cuts a one-line title to TitleMaxRunes on a word boundary.
func cutTitle(s string) string {
	if utf8.RuneCountInString(s) <= TitleMaxRunes {
		return s
	}
	// The byte offset of the rune just past the limit.
	end, n := len(s), 0
	for i := range s {
		if n == TitleMaxRunes {
			end = i
			break
		}
		n++
	}
	cut := s[:end]
	// Unless the cut falls on a space, back off to the last space; but
	// one very long word is cut mid-word rather than losing over half.
	if s[end] != ' ' {
		if i := strings.LastIndexByte(cut, ' '); i >= len(cut)/2 {
			cut = cut[:i]
		}
	}
	return strings.TrimRightFunc(cut, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) + "…"
}

// TitleOf returns the title event e gives its session, if any: a
// session/title event's title (fromModel true), or the prompt title of a
// human prompt or of a child's delegated task, as it enters the history
// or is queued in the inbox (fromModel false). A model
// title replaces any title; a prompt title only names an untitled
// session.
func TitleOf(e Event) (title string, fromModel bool) {
	switch e.Type {
	case TypeTitle:
		var p Title
		if e.Decode(&p) != nil {
			return "", false
		}
		// Normalized like a prompt title: a title is one printable line.
		t := PromptTitle(p.Title)
		return t, t != ""
	case TypeUserMessage:
		var m llm.Message
		if e.Decode(&m) != nil || !namesSession(m.Source) {
			return "", false
		}
		return PromptTitle(m.Text()), false
	case TypeInboxSpliced:
		// The queued prompt: in the stored log a user/message that
		// entered unchanged from the inbox only references it (InboxRef),
		// so the splice is where its text is.
		var sp InboxSpliced
		if e.Decode(&sp) != nil {
			return "", false
		}
		for _, m := range sp.Inserted {
			if namesSession(m.Source) {
				if t := PromptTitle(m.Text()); t != "" {
					return t, false
				}
			}
		}
	}
	return "", false
}

// namesSession reports whether a user message of this source is a prompt
// that names a session: a person's, or the task a parent delegated.
func namesSession(s llm.Source) bool {
	return s.Kind == "user" || (s.Kind == "parent" && s.Form == "delegation")
}
