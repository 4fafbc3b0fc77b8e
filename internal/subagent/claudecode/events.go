package claudecode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
)

// maxLine bounds one stdout line (tool results can be large); a longer
// line is skipped and counted rather than ending the stream.
const maxLine = 16 << 20

// readLines calls line with every newline-terminated line of r (without
// the newline; a final unterminated line counts too) and oversize with the
// length of every line longer than limit, which is skipped. Each slice
// passed to line is freshly allocated and may be retained.
func readLines(r io.Reader, limit int, line func([]byte), oversize func(n int)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		buf      []byte
		skipping bool
		n        int
	)
	for {
		frag, err := br.ReadSlice('\n')
		complete := err == nil
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil
		}
		n += len(frag)
		switch {
		case skipping:
		case n > limit+1: // +1: the newline itself
			skipping, buf = true, nil
		default:
			buf = append(buf, frag...)
		}
		if complete || (err != nil && n > 0) {
			if skipping {
				oversize(n)
			} else {
				line(bytes.TrimSuffix(buf, []byte("\n")))
			}
			buf, skipping, n = nil, false, 0
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// Wire shapes of the stream-json events the run reads. Unknown fields are
// ignored; every type is decoded only after the {type, subtype} head.

type head struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
}

type initEvent struct {
	SessionID      string `json:"session_id"`
	Model          string `json:"model"`
	PermissionMode string `json:"permissionMode"`
}

type messageEvent struct {
	Message struct {
		// Content is an array of blocks, or a string for plain user text.
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// blocks decodes message content; a string (or anything else) yields none.
func blocks(raw json.RawMessage) []contentBlock {
	var out []contentBlock
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}

type resultEvent struct {
	Subtype           string          `json:"subtype"`
	IsError           bool            `json:"is_error"`
	Result            string          `json:"result"`
	SessionID         string          `json:"session_id"`
	NumTurns          int             `json:"num_turns"`
	TotalCostUSD      float64         `json:"total_cost_usd"`
	StopReason        *string         `json:"stop_reason"`
	TerminalReason    string          `json:"terminal_reason"`
	APIErrorStatus    *int            `json:"api_error_status"`
	Errors            []string        `json:"errors"`
	StructuredOutput  json.RawMessage `json:"structured_output"`
	PermissionDenials []struct {
		ToolName  string          `json:"tool_name"`
		ToolInput json.RawMessage `json:"tool_input"`
	} `json:"permission_denials"`
	Usage *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

func (e *resultEvent) usage() llm.Usage {
	if e.Usage == nil {
		return llm.Usage{}
	}
	return llm.Usage{
		InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens,
		CacheReadTokens: e.Usage.CacheReadInputTokens, CacheWriteTokens: e.Usage.CacheCreationInputTokens,
	}
}

func (e *resultEvent) success() bool { return e.Subtype == "success" && !e.IsError }

// summary is the one-line account of a result: Claude's turn count
// (num_turns), its cost estimate and the permission denials.
func (e *resultEvent) summary() string {
	s := fmt.Sprintf("%s after %d turns, cost estimate $%.4f (Claude Code's)", e.Subtype, e.NumTurns, e.TotalCostUSD)
	if n := len(e.PermissionDenials); n > 0 {
		var parts []string
		for i, d := range e.PermissionDenials {
			if i == 8 {
				parts = append(parts, fmt.Sprintf("… %d more", n-i))
				break
			}
			p := d.ToolName
			if in := summarize(d.ToolInput); in != "" {
				p += " (" + clip(in, 80) + ")"
			}
			parts = append(parts, p)
		}
		s += fmt.Sprintf("; permission denials (%d): %s", n, strings.Join(parts, ", "))
	}
	return s
}

// errorText is Claude's account of a failed result.
func (e *resultEvent) errorText() string {
	msg := strings.Join(e.Errors, "; ")
	if msg == "" {
		msg = e.Result
	}
	if msg == "" {
		msg = "no error text"
	}
	if e.APIErrorStatus != nil {
		msg += fmt.Sprintf(" (API status %d)", *e.APIErrorStatus)
	}
	return "claude-code result " + e.Subtype + ": " + msg
}

// summaryKeys are the tool input fields that best describe a call, in
// order of preference.
var summaryKeys = []string{"command", "file_path", "notebook_path", "path", "pattern", "url", "query", "description", "prompt", "skill"}

// summarize describes a tool input in one short line.
func summarize(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) == nil {
		for _, k := range summaryKeys {
			if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
				return oneLine(s, 120)
			}
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, input) != nil || buf.String() == "{}" || buf.String() == "null" {
		return ""
	}
	return oneLine(buf.String(), 120)
}

// resultText is the text of a tool_result's content (a string or text
// blocks).
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, " ")
}

// oneLine collapses whitespace runs (newlines included) to single spaces
// and clips to n bytes.
func oneLine(s string, n int) string {
	return clip(strings.Join(strings.Fields(s), " "), n)
}

// clip bounds s to n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:max(cut, 0)] + more
}

func appendLine(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}
