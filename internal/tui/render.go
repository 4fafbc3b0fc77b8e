package tui

import (
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/cli/progress"
	"github.com/dsh-dev/dsh/internal/llm"
)

// tailLines is how many lines of a command's output a finished bash row
// shows; diffLines caps an edit's diff.
const (
	tailLines = 3
	diffLines = 12
)

// renderBlock draws one finished item at width columns, for the
// scrollback. expand shows reasoning in full.
func (t theme) renderBlock(b block, width int, expand bool) string {
	switch b.kind {
	case bUser:
		out := "\n" + indent(progress.Clean(b.text), width, t.user.Render("› "), "  ")
		if b.detail != "" {
			out += "\n" + t.dim.Render("  ("+b.detail+")")
		}
		return out
	case bAssistant:
		return indent(t.markdown(progress.Clean(b.text), width-2), width+100, t.ok.Render("●")+" ", "  ")
	case bReasoning:
		if expand {
			return indent(t.dim.Render(progress.Clean(b.text)), width, t.dim.Render("∴ "), "  ")
		}
		label := "Thought"
		if b.ms >= 100 { // shorter is a replay or one chunk: no real duration
			label += " for " + progress.Seconds(b.ms)
		}
		return t.dim.Render(cut("∴ "+label+" · ctrl+o expands", width))
	case bTool:
		return t.toolBlock(b, width)
	case bApproval:
		mark, verb := t.bad.Render("✗"), "denied"
		if b.ok {
			mark, verb = t.ok.Render("✓"), "allowed"
		}
		return cut(mark+" "+verb+" "+firstLineOf(progress.Clean(b.text))+t.dim.Render(" · "+b.detail), width)
	case bChild:
		c := b.child
		mark := t.ok.Render("◆")
		if !b.ok {
			mark = t.bad.Render("◆")
		}
		line := mark + " " + t.bold.Render("subagent "+orDefault(c.label, c.childID)) + t.dim.Render(" · "+childFacts(c, c.ended)+" · "+c.stop)
		out := cut(line, width)
		if b.detail != "" {
			out += "\n" + indent(t.bad.Render(firstLineOf(b.detail)), width, "  ⎿ ", "    ")
		}
		return out
	case bTurnEnd:
		return t.warn.Render(cut("  ⎿ "+b.text, width))
	case bNotice:
		return indent(t.dim.Render(b.text), width, "", "")
	case bError:
		return indent(t.bad.Render(b.text), width, t.bad.Render("! "), "  ")
	case bCompaction:
		return t.dim.Render(cut("≡ "+b.text, width))
	case bAnswer:
		return t.answerBlock(b, width)
	case bPlanMode:
		mark := t.dim.Render("◇ ")
		if b.ok {
			mark = t.accent.Render("◇ ")
		}
		return indent(t.dim.Render(b.text), width, mark, "  ")
	}
	return ""
}

// toolBlock draws a finished tool call: its summary row, how it ended and
// what matters of its result (an edit's diff, a command's last lines).
func (t theme) toolBlock(b block, width int) string {
	r := b.result
	outcome, ok, diff := progress.Outcome(*r)
	mark := t.ok.Render("●")
	if !ok {
		mark = t.bad.Render("●")
	}
	lines := []string{cut(mark+" "+t.bold.Render(callTitle(b.call)), width)}
	st := t.dim
	if !ok {
		st = t.bad
	}
	lines = append(lines, cut("  ⎿ "+st.Render(outcome), width))
	switch {
	case diff != "":
		lines = append(lines, t.diff(diff, width)...)
	case b.call.name == "bash" && !r.IsError:
		for _, l := range tail(resultText(r.Content), tailLines) {
			lines = append(lines, t.dim.Render(cut("    "+l, width)))
		}
	}
	return strings.Join(lines, "\n")
}

// diff colours a unified diff, skipping its file headers, capped.
func (t theme) diff(d string, width int) []string {
	var out []string
	n := 0
	for l := range strings.SplitSeq(strings.TrimRight(d, "\n"), "\n") {
		if strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		if n == diffLines {
			out = append(out, t.dim.Render("    …"))
			break
		}
		n++
		s := t.dim
		switch {
		case strings.HasPrefix(l, "+"):
			s = t.add
		case strings.HasPrefix(l, "-"):
			s = t.del
		case strings.HasPrefix(l, "@@"):
			s = t.hunk
		}
		out = append(out, s.Render(cut("    "+strings.ReplaceAll(l, "\t", "    "), width)))
	}
	return out
}

// callTitle names a call: the command of bash, the path of a file tool,
// the URL of a fetch (progress.CallSummary's choice of argument).
func callTitle(c toolRow) string {
	if c.name == "subagent" || c.name == "subagent_fork" {
		a := argsOf(c.args)
		if d, ok := a["description"].(string); ok && d != "" {
			return "subagent " + d
		}
	}
	return progress.CallSummary(c.name, c.args)
}

// childFacts is a child row's model, elapsed time and tokens.
func childFacts(c *childRow, now int64) string {
	parts := []string{}
	model := c.provider
	if c.model != "" {
		model = c.model
	}
	if model != "" {
		parts = append(parts, model)
	}
	if c.started > 0 && now >= c.started {
		parts = append(parts, progress.Seconds(now-c.started))
	}
	if tok := c.usage.InputTokens + c.usage.CacheReadTokens + c.usage.CacheWriteTokens + c.usage.OutputTokens; tok > 0 {
		parts = append(parts, progress.Count(tok)+" tokens")
	}
	return strings.Join(parts, " · ")
}

func resultText(bs []llm.Block) string {
	var b strings.Builder
	for _, x := range bs {
		if x.Type == llm.BlockText {
			b.WriteString(x.Text)
		}
	}
	return progress.Clean(b.String())
}

// tail is the last n non-empty lines of s.
func tail(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var out []string
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		// The exit code is on the row already.
		if l := strings.TrimSpace(lines[i]); l != "" && !(strings.HasPrefix(l, "[exit code:") && strings.HasSuffix(l, "]")) {
			out = append([]string{strings.ReplaceAll(lines[i], "\t", "    ")}, out...)
		}
	}
	return out
}

func firstLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// usageText is the token part of the status line.
func usageText(u llm.Usage) string {
	in := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	if in == 0 && u.OutputTokens == 0 {
		return ""
	}
	return fmt.Sprintf("↑%s ↓%s", progress.Count(in), progress.Count(u.OutputTokens))
}
