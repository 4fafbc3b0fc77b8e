package progress

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// callSummary is the short form of a tool call: its name and the one
// argument a person recognises it by.
func callSummary(name, args string) string {
	a := parseArgs(args)
	var key string
	switch name {
	case "bash":
		key = str(a, "command")
	case "read", "write", "edit", "read_image":
		key = str(a, "file_path", "path")
	case "str_replace_based_edit_tool":
		key = strings.TrimSpace(str(a, "command") + " " + str(a, "path"))
	case "glob", "grep":
		key = str(a, "pattern")
	case "web_fetch":
		key = str(a, "url")
	case "web_search":
		key = str(a, "query")
	case "lsp":
		// "goToDefinition main.go:12:5"
		key = strings.TrimSpace(str(a, "operation") + " " + str(a, "file_path"))
		if l, ok := a["line"].(float64); ok {
			key += fmt.Sprintf(":%d", int(l))
			if c, ok := a["character"].(float64); ok {
				key += fmt.Sprintf(":%d", int(c))
			}
		}
	default:
		key = str(a, "description", "prompt", "path", "command", "id")
	}
	key = firstLine(key)
	if key == "" {
		return clean(name)
	}
	return clean(name + " " + key)
}

// clean drops control characters (escape sequences above all) from
// text the model or a tool produced, so that it cannot drive the
// terminal; newlines and tabs stay.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}

// resultMeta gathers the meta fields of the built-in tools the renderer
// reports; each tool sets only its own.
type resultMeta struct {
	// bash
	ExitCode      *int  `json:"exitCode"`
	DurationMs    int64 `json:"durationMs"`
	TimedOut      bool  `json:"timedOut"`
	Cancelled     bool  `json:"cancelled"`
	SandboxDenied bool  `json:"sandboxDenied"`
	// edit, str_replace_based_edit_tool
	Diff string `json:"diff"`
	// write
	Created bool `json:"created"`
	Bytes   *int `json:"bytes"`
	// read
	FirstLine  int `json:"firstLine"`
	LastLine   int `json:"lastLine"`
	TotalLines int `json:"totalLines"`
	// web_fetch
	Status *int `json:"status"`
	Chars  int  `json:"chars"`
	// web_search
	Sources []json.RawMessage `json:"sources"`
	// glob, grep
	Total *int `json:"total"`
	Files *int `json:"files"`
}

// outcomeOf says how a call ended, whether it went well, and the diff to
// show for an edit.
func outcomeOf(p session.ToolResult) (outcome string, ok bool, diff string) {
	outcome, ok, diff = rawOutcome(p)
	return clean(outcome), ok, clean(diff)
}

func rawOutcome(p session.ToolResult) (outcome string, ok bool, diff string) {
	var m resultMeta
	if len(p.Meta) > 0 {
		_ = json.Unmarshal(p.Meta, &m)
	}
	if p.IsError {
		s := "failed"
		if p.Error != nil {
			s = p.Error.Code
			if p.Error.Reason != "" {
				s += ": " + firstLine(p.Error.Reason)
			} else if t := resultText(p.Content); t != "" {
				s += ": " + firstLine(strings.TrimPrefix(t, "Error: "))
			}
		}
		return s, false, ""
	}
	switch {
	case m.ExitCode != nil: // bash
		s := fmt.Sprintf("exit %d · %s", *m.ExitCode, seconds(m.DurationMs))
		switch {
		case m.TimedOut:
			s = "timed out · " + seconds(m.DurationMs)
		case m.Cancelled:
			s = "cancelled"
		}
		if m.SandboxDenied {
			s += " · blocked by the sandbox"
		}
		return s, *m.ExitCode == 0 && !m.TimedOut && !m.Cancelled, ""
	case m.Diff != "":
		add, del := diffStat(m.Diff)
		return fmt.Sprintf("+%d -%d lines", add, del), true, m.Diff
	case m.Bytes != nil: // write
		verb := "wrote"
		if m.Created {
			verb = "created"
		}
		return fmt.Sprintf("%s, %s", verb, size(int64(*m.Bytes))), true, ""
	case m.TotalLines > 0:
		return fmt.Sprintf("lines %d-%d of %d", m.FirstLine, m.LastLine, m.TotalLines), true, ""
	case m.Status != nil: // web_fetch
		return fmt.Sprintf("HTTP %d · %s chars", *m.Status, count(int64(m.Chars))), *m.Status < 400, ""
	case m.Sources != nil:
		return plural(len(m.Sources), "source"), true, ""
	case m.Total != nil:
		return plural(*m.Total, "match"), true, ""
	case m.Files != nil:
		return plural(*m.Files, "file"), true, ""
	}
	return "ok", true, ""
}

// diffStat counts added and removed lines of a unified diff.
func diffStat(d string) (add, del int) {
	for l := range strings.SplitSeq(d, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			add++
		case strings.HasPrefix(l, "-"):
			del++
		}
	}
	return add, del
}

func resultText(bs []llm.Block) string {
	for _, b := range bs {
		if b.Type == llm.BlockText {
			return b.Text
		}
	}
	return ""
}

// firstLine is the first non-empty line of s, trimmed, with an ellipsis
// when more follows.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "ch") {
		return fmt.Sprintf("%d %ses", n, what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// seconds formats milliseconds as 0.4s, 12s or 2m05s.
func seconds(ms int64) string {
	switch {
	case ms < 10_000:
		return fmt.Sprintf("%.1fs", float64(ms)/1000)
	case ms < 60_000:
		return fmt.Sprintf("%ds", ms/1000)
	}
	return fmt.Sprintf("%dm%02ds", ms/60_000, ms/1000%60)
}

// count formats n as 950, 12.3k or 4.1M.
func count(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1_000_000)
}

func size(n int64) string {
	if n < 1024 {
		return plural(int(n), "byte")
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// tokens summarises usage: the whole prompt (uncached + cache reads +
// cache writes), how much of it hit the cache, and the output.
func tokens(u llm.Usage) string {
	if u.IsZero() {
		return "no token usage reported"
	}
	in := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	s := count(in) + " tokens in"
	if in > 0 {
		s += fmt.Sprintf(" (%s cached, %d%%)", count(u.CacheReadTokens), u.CacheReadTokens*100/in)
	}
	return s + ", " + count(u.OutputTokens) + " out"
}
