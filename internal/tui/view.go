package tui

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-dev/dsh/internal/cli/progress"
)

// trailingPad is a line's trailing blanks, before any closing SGR.
var trailingPad = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(` +((?:\x1b\[[0-9;]*m)*)$`) })

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// View draws the live area: what is streaming, what runs, the approval
// prompt or an overlay, the composer and the status line. Finished items
// are in the scrollback already and are not drawn again, so a long
// transcript costs a frame nothing.
func (m *model) View() tea.View {
	if m.quitting {
		return tea.NewView("")
	}
	top, bottom := m.liveTop(), m.liveBottom()
	// The composer's cursor is placed after what is drawn above it.
	above := top
	if above != "" {
		above += "\n"
	}
	content := above + bottom
	offset := strings.Count(above, "\n") + 1 // the rule above the composer
	if m.o.AltScreen {
		used := strings.Count(content, "\n") + 1
		room := m.height - used
		var tr []string
		if room > 0 {
			end := max(len(m.transcript)-m.scroll, 0)
			tr = m.transcript[max(0, end-room):end]
			for len(tr) < room {
				tr = append([]string{""}, tr...)
			}
		}
		if len(tr) > 0 {
			content = strings.Join(tr, "\n") + "\n" + content
			offset += len(tr)
		}
	}
	if !m.o.AltScreen {
		m.noteFrame(strings.Count(content, "\n") + 1)
	}
	v := tea.NewView(content)
	v.AltScreen = m.o.AltScreen
	if c := m.cursor(); c != nil && m.overlay == nil {
		c.Y += offset
		c.X += 2 // the prompt mark
		v.Cursor = c
	}
	return v
}

// cursor is the composer's; the approval prompt hides it (its feedback
// line draws its own caret).
func (m *model) cursor() *tea.Cursor {
	if len(m.approvals) > 0 || m.asking != nil {
		return nil
	}
	return m.composer.Cursor()
}

// liveTop is everything above the composer.
func (m *model) liveTop() string {
	var parts []string
	now := m.now().UnixMilli()
	spin := spinner[int(now/int64(tickEvery/1e6))%len(spinner)]
	w := m.width
	st := m.st
	// What the live area may use for the streaming answer: the screen
	// less the composer, the status line and the rows below.
	// The frame stays within half the screen where it can (the streaming
	// answer shows its tail), so that what is printed above it has room
	// (see flush): the rule, composer, status and hint take 4 rows.
	room := max(m.height/2-5-len(st.order)-len(st.kids), 3)
	if r := strings.TrimSpace(st.reasoning.String()); r != "" && st.text.Len() == 0 || m.expand && st.reasoning.Len() > 0 {
		r = progress.Clean(strings.TrimSpace(st.reasoning.String()))
		if m.expand {
			lines := strings.Split(wrap(r, w-2), "\n")
			lines = lines[max(0, len(lines)-min(room/2, 12)):]
			parts = append(parts, m.th.dim.Render(indent(strings.Join(lines, "\n"), w, "∴ ", "  ")))
		} else {
			last := r[strings.LastIndexByte(r, '\n')+1:]
			parts = append(parts, m.th.dim.Render(cut("∴ thinking · "+last, w)))
		}
	}
	if t := st.text.String(); strings.TrimSpace(t) != "" {
		if m.liveKey.n != len(t) || m.liveKey.width != w || m.liveKey.room != room {
			full := strings.TrimSpace(t)
			tail := liveTail(full, room)
			mark := m.th.ok.Render("●") + " "
			if len(tail) < len(full) {
				mark = m.th.dim.Render("⋮") + " " // the start scrolled away
			}
			m.liveKey = liveCache{n: len(t), width: w, room: room,
				out: indent(m.th.markdown(progress.Clean(tail), w-2), w+100, mark, "  ")}
		}
		lines := strings.Split(m.liveKey.out, "\n")
		if len(lines) > room {
			lines = lines[len(lines)-room:]
			if strings.HasPrefix(lines[0], "  ") {
				lines[0] = m.th.dim.Render("⋮") + " " + lines[0][2:] // the start scrolled away
			}
		}
		parts = append(parts, strings.Join(lines, "\n"))
	}
	if st.running && st.stepStart > 0 && len(st.order) == 0 && m.asking == nil {
		parts = append(parts, m.th.accent.Render(cut(spin+" waiting for "+orDefault(st.model, "the model")+" · "+progress.Seconds(now-st.stepStart), w)))
	}
	for _, id := range st.order {
		c := st.calls[id]
		title := callTitle(*c)
		if c.name == toolAskUser || c.name == toolExitPlan {
			// The panel below shows what it asks.
			title = map[bool]string{true: "the plan waits for your review", false: "waiting for your answer"}[c.name == toolExitPlan]
		}
		parts = append(parts, cut(m.th.accent.Render(spin)+" "+title+m.th.dim.Render(" · "+progress.Seconds(now-c.started)), w))
	}
	for _, id := range st.kids {
		c := st.children[id]
		parts = append(parts, cut(m.th.accent.Render(spin+" ◆")+" "+m.th.bold.Render("subagent "+orDefault(c.label, shortID(c.childID)))+
			m.th.dim.Render(" · "+childFacts(c, now)), w))
	}
	if len(m.approvals) > 0 {
		parts = append(parts, m.viewApproval())
	} else if m.asking != nil {
		parts = append(parts, m.viewQuestion())
	} else if m.overlay != nil {
		parts = append(parts, m.viewOverlay())
	}
	// While idle a queued message is about to start the next turn: it is
	// shown only while it waits for a running one.
	queue := st.queue
	if !st.running {
		queue = nil
	}
	for i, q := range queue {
		line := "⧗ queued: " + firstLineOf(progress.Clean(q.Text()))
		if i == len(queue)-1 {
			line += " · ↑ edits"
		}
		parts = append(parts, m.th.dim.Render(cut(line, w)))
	}
	return strings.Join(parts, "\n")
}

// liveTail is the end of a streaming answer that can show in rows rows:
// its last rows source lines (each draws at least one row), reopening a
// code block the cut falls in. Rendering only the tail keeps each frame's
// cost flat however long the answer grows.
func liveTail(t string, rows int) string {
	i := len(t)
	for n := 0; n < rows && i > 0; n++ {
		i = strings.LastIndexByte(t[:i], '\n')
		if i < 0 {
			return t
		}
	}
	if i <= 0 {
		return t
	}
	rest := strings.TrimLeft(t[i+1:], "\n")
	if strings.Count(t[:i], "```")%2 == 1 {
		if strings.HasPrefix(rest, "```") {
			// The cut falls on the block's closing fence: drop it.
			_, after, _ := strings.Cut(rest, "\n")
			return strings.TrimLeft(after, "\n")
		}
		return "```\n" + rest
	}
	return rest
}

// liveBottom is the composer, the status line and the hint.
func (m *model) liveBottom() string {
	w := m.width
	rule := m.th.dim.Render(strings.Repeat("─", w))
	parts := []string{rule}
	if len(m.approvals) > 0 {
		parts = append(parts, m.th.dim.Render(cut("  answer the approval above", w)))
	} else if m.asking != nil {
		parts = append(parts, m.th.dim.Render(cut("  answer the "+map[bool]string{true: "plan", false: "question"}[m.asking.q.Kind == "plan"]+" above", w)))
	} else {
		parts = append(parts, m.prefixComposer())
	}
	parts = append(parts, m.statusLine())
	if m.hint != "" {
		parts = append(parts, m.th.warn.Render(cut(m.hint, w)))
	}
	return strings.Join(parts, "\n")
}

// prefixComposer draws the composer with a prompt mark on its first
// line; the composer is 2 columns narrower for it.
func (m *model) prefixComposer() string {
	lines := strings.Split(m.composer.View(), "\n")
	for i, l := range lines {
		// The textarea pads its lines to its width; the padding would
		// only wrap, and linger, when the terminal narrows.
		lines[i] = trailingPad().ReplaceAllString(l, "$1")
	}
	mark := m.th.user.Render("›") + " "
	if m.st.running {
		mark = m.th.dim.Render("›") + " "
	}
	for i := range lines {
		if i == 0 {
			lines[i] = mark + lines[i]
		} else {
			lines[i] = "  " + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// statusLine names the model, effort, preset, context use, tokens and
// session; when it does not fit, the least useful facts give way first.
func (m *model) statusLine() string {
	st := m.st
	model := st.model
	if st.provider != "" && model != "" {
		model = st.provider + "/" + model
	}
	type fact struct {
		text string
		drop int // 0 stays; higher goes first
	}
	facts := []fact{}
	if st.running {
		facts = append(facts, fact{"working " + progress.Seconds(m.now().UnixMilli()-st.turnStart), 0})
	}
	facts = append(facts, fact{orDefault(model, "model: starting"), 0})
	if st.effort != "" {
		facts = append(facts, fact{"effort " + st.effort, 4})
	}
	if st.preset != "" {
		facts = append(facts, fact{st.preset, 1})
	}
	if p := st.contextPercent(); p >= 1 {
		facts = append(facts, fact{fmt.Sprintf("ctx %d%%", p), 1})
	} else if p == 0 {
		facts = append(facts, fact{"ctx <1%", 1})
	}
	if u := usageText(st.usage); u != "" {
		facts = append(facts, fact{u, 3})
	}
	facts = append(facts, fact{shortID(m.id), 2})
	if where := m.b.Where(); where != "" {
		facts = append(facts, fact{"@ " + where, 5})
	}
	join := func(max int) string {
		var parts []string
		for _, f := range facts {
			if f.drop <= max {
				parts = append(parts, f.text)
			}
		}
		return strings.Join(parts, " · ")
	}
	// Plan mode leads the line, as a badge of its own.
	badge, width := "", m.width
	if st.planMode {
		badge, width = m.th.planBadge.Render(" PLAN ")+" ", m.width-7
	}
	line := join(5)
	for lvl := 4; lvl >= 0 && ansi.StringWidth(line) > width; lvl-- {
		line = join(lvl)
	}
	return badge + m.th.status.Render(cut(line, width))
}

// viewApproval draws the first pending approval: the tool, the exact
// command or path, the directory and the reason, with deny focused.
func (m *model) viewApproval() string {
	a := m.approvals[0]
	t := m.th
	inner := max(m.width-4, 16)
	what := a.Command
	if what == "" {
		what = callTitle(toolRow{name: a.ToolName, args: string(a.Arguments)})
	}
	var lines []string
	title := "Allow " + a.ToolName + "?"
	if a.SessionID != m.id {
		title += t.dim.Render(" (subagent " + shortID(a.SessionID) + ")")
	}
	lines = append(lines, t.modalTitle.Render(title))
	lines = append(lines, indent(t.bold.Render(progress.Clean(what)), inner, "$ ", "  "))
	if a.Cwd != "" {
		lines = append(lines, t.dim.Render(cut("in "+a.Cwd, inner)))
	}
	if a.Reason != "" {
		lines = append(lines, indent(progress.Clean(a.Reason), inner, t.dim.Render("why: "), "     "))
	}
	if a.Note != "" {
		lines = append(lines, indent(t.dim.Render(progress.Clean(a.Note)), inner, "", ""))
	}
	deny, allow := "  Deny  ", "  Allow once  "
	if m.denyFocus {
		deny = t.selected.Render("› Deny ") + " "
	} else {
		allow = t.selected.Render("› Allow once ") + " "
	}
	lines = append(lines, "", deny+"  "+allow)
	if m.feedback != nil {
		lines = append(lines, "feedback: "+m.feedback.Value()+"▏", t.dim.Render(cut("enter denies with this feedback · esc goes back", inner)))
	} else {
		keys := "y allow once · n deny · e deny with feedback · enter chooses"
		if sessionGrantable(a) {
			keys = "y allow once · a allow for the session · n deny · e deny with feedback"
		}
		lines = append(lines, t.dim.Render(wrap(keys, inner)))
	}
	if n := len(m.approvals) - 1; n > 0 {
		lines = append(lines, t.dim.Render(fmt.Sprintf("%d more waiting", n)))
	}
	return t.modal.Width(min(m.width, inner+4)).Render(strings.Join(lines, "\n"))
}
