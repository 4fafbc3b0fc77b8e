package session

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
)

func TestPromptTitle(t *testing.T) {
	long := "Refactor the session store so that listing never reads whole logs and titles are kept in a column"
	for _, tc := range []struct{ in, want string }{
		{"fix the failing test", "fix the failing test"},
		{"  \n\n  fix   the\tfailing   test  \nand more details\n", "fix the failing test"},
		{"", ""},
		{" \n\t\n", ""},
		{long, "Refactor the session store so that listing never reads whole…"},
		// One word longer than the limit is cut mid-word.
		{strings.Repeat("x", 80), strings.Repeat("x", 60) + "…"},
		// Runes, not bytes, are counted.
		{strings.Repeat("é", 70), strings.Repeat("é", 60) + "…"},
		// Punctuation left at the cut is dropped before the ellipsis.
		{strings.Repeat("word ", 11) + "abcd, tail tail tail", strings.Repeat("word ", 11) + "abcd…"},
		// A cut in the middle of a word backs off to the word boundary.
		{strings.Repeat("word ", 11) + "abcdefgh tail", strings.Repeat("word ", 10) + "word…"},
		// Terminal escapes and bidi overrides cannot reach the table.
		{"\x1b[2Jclear \x1b]0;owned\x07screen\u202e now\r", "[2Jclear ]0;ownedscreen now"},
	} {
		got := PromptTitle(tc.in)
		if got != tc.want {
			t.Errorf("PromptTitle(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if n := utf8.RuneCountInString(got); n > TitleMaxRunes+1 {
			t.Errorf("PromptTitle(%q) has %d runes", tc.in, n)
		}
	}
}

func TestCleanTitle(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"Fix flaky lease test".`, "Fix flaky lease test"},
		{"\n  **Add session titles**  \nbecause…", "Add session titles"},
		{"``", ""},
	} {
		if got := CleanTitle(tc.in); got != tc.want {
			t.Errorf("CleanTitle(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTitleOf(t *testing.T) {
	msg := func(src llm.Source, text string) Event {
		b, _ := json.Marshal(llm.Message{ID: "m", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: src})
		return Event{Type: TypeUserMessage, Data: b, SurfaceOp: Append}
	}
	titled := func(p Title) Event {
		b, _ := json.Marshal(p)
		return Event{Type: TypeTitle, Data: b, Ignorable: true}
	}
	for _, tc := range []struct {
		name      string
		ev        Event
		want      string
		fromModel bool
	}{
		{"human prompt", msg(llm.Source{Kind: "user"}, "list the files\nplease"), "list the files", false},
		{"delegated task", msg(llm.Source{Kind: "parent", Form: "delegation"}, "review the diff"), "review the diff", false},
		{"injected context", msg(llm.Source{Kind: "plugin", Plugin: "instructions"}, "AGENTS.md says"), "", false},
		{"parent message to a child", msg(llm.Source{Kind: "parent", Form: "agent-message"}, "stop"), "", false},
		{"model title", titled(Title{Title: "List files", Model: "m"}), "List files", true},
		{"model title normalized", titled(Title{Title: "List\tfiles\x1b[31m\nsecond line", Model: "m"}), "List files[31m", true},
		{"failed model title", titled(Title{Model: "m", Error: &llm.Failure{Code: llm.CodeAuth, Message: "no key"}}), "", false},
		{"other event", Event{Type: TypeTurnStart, Data: json.RawMessage(`{"turn":1}`)}, "", false},
		{"undecodable", Event{Type: TypeTitle, Data: json.RawMessage(`[]`)}, "", false},
	} {
		got, fromModel := TitleOf(tc.ev)
		if got != tc.want || fromModel != tc.fromModel {
			t.Errorf("%s: TitleOf = %q, %v; want %q, %v", tc.name, got, fromModel, tc.want, tc.fromModel)
		}
	}
}

func TestTitleEventValidates(t *testing.T) {
	b, _ := json.Marshal(Title{Title: "x", Provider: "p", Model: "m", Request: llm.Request{Model: "m"}})
	if err := (Event{Type: TypeTitle, Data: b}).Validate(); err != nil {
		t.Fatalf("session/title does not validate: %v", err)
	}
}
