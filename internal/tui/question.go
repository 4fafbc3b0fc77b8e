package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-dev/dsh/internal/cli/progress"
	"github.com/dsh-dev/dsh/internal/host"
)

// asking is the panel of the first pending question (or plan): which
// item it shows, the row under the cursor and what has been chosen. It
// lives only while its question is pending; the host holds the question
// itself, so a reattached UI starts the panel afresh.
type asking struct {
	q    host.Question
	item int
	// cursor is the row of the shown item: an option, or the "Other"
	// row after them.
	cursor []int
	chosen []map[int]bool
	other  []textarea.Model
	// plan: the focused choice, the feedback being typed and how far the
	// plan is scrolled from its top.
	approveFocus bool
	feedback     *textarea.Model
	scroll       int
}

func newAsking(q host.Question, width int) *asking {
	a := &asking{q: q, approveFocus: true}
	for range q.Questions {
		a.cursor = append(a.cursor, 0)
		a.chosen = append(a.chosen, map[int]bool{})
		a.other = append(a.other, oneLine("type your own answer", width))
	}
	// A question without options is answered by typing.
	if len(q.Questions) > 0 && len(q.Questions[0].Options) == 0 {
		a.other[0].Focus()
	}
	return a
}

// oneLine is a one-row text field.
func oneLine(placeholder string, width int) textarea.Model {
	ta := textarea.New()
	ta.Placeholder = placeholder
	ta.ShowLineNumbers, ta.Prompt = false, ""
	ta.SetHeight(1)
	ta.SetWidth(max(width-16, 10))
	ta.SetVirtualCursor(false)
	ta.CharLimit = 2000
	return ta
}

// onOther says whether the cursor is on the shown item's "Other" row.
func (a *asking) onOther() bool {
	return len(a.q.Questions) > 0 && a.cursor[a.item] == len(a.q.Questions[a.item].Options)
}

// answered says whether item i has a choice or a typed answer.
func (a *asking) answered(i int) bool {
	return len(a.chosen[i]) > 0 || strings.TrimSpace(a.other[i].Value()) != ""
}

// answers is what the panel submits: per item id, the chosen labels in
// option order, or the typed answer alone (the host takes one or the
// other, never both: typing on "Other" clears the choices, and a choice
// clears what was typed).
func (a *asking) answers() map[string][]string {
	out := map[string][]string{}
	for i, it := range a.q.Questions {
		if other := strings.TrimSpace(a.other[i].Value()); other != "" {
			out[it.ID] = []string{other}
			continue
		}
		var got []string
		for j, o := range it.Options {
			if a.chosen[i][j] {
				got = append(got, o.Label)
			}
		}
		out[it.ID] = got
	}
	return out
}

// addQuestion adds a pending question of this UI's sessions.
func (m *model) addQuestion(q host.Question) {
	if !m.kin[q.SessionID] {
		return
	}
	for _, x := range m.questions {
		if x.ID == q.ID {
			return
		}
	}
	m.questions = append(m.questions, q)
	if m.asking == nil {
		m.asking = newAsking(q, m.width)
	}
}

// dropQuestion removes a question that was answered or cancelled.
func (m *model) dropQuestion(id string) {
	for i, x := range m.questions {
		if x.ID == id {
			m.questions = append(m.questions[:i:i], m.questions[i+1:]...)
			break
		}
	}
	if m.asking != nil && m.asking.q.ID == id {
		m.asking = nil
		if len(m.questions) > 0 {
			m.asking = newAsking(m.questions[0], m.width)
		}
	}
}

func (m *model) loadQuestions() tea.Cmd {
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		list, err := b.Questions(ctx)
		if err != nil {
			return doneMsg{err: err}
		}
		return questionsMsg{list}
	}
}

type questionsMsg struct{ list []host.Question }

// submitQuestion sends the answer; the panel goes at once, as an
// approval's does, and the feed's resolution finds nothing left to drop.
func (m *model) submitQuestion(ans host.QuestionAnswer) tea.Cmd {
	q := m.asking.q
	m.dropQuestion(q.ID)
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		if err := b.AnswerQuestion(ctx, q.SessionID, q.ID, ans); err != nil && host.ErrorCode(err) != host.CodeQuestionNotPending {
			return doneMsg{err: err}
		}
		return nil
	}
}

// questionKey drives the panel. Questions: ↑↓ move, a digit picks an
// option, space toggles (multi-select), typing on "Other" writes an
// answer, enter takes the item and goes to the next (the last submits),
// tab moves between items. Plans: y approves, n keeps planning with
// feedback, ←→ and enter choose, ↑↓ scroll. Esc cancels the turn, as it
// does at an approval.
func (m *model) questionKey(k tea.KeyPressMsg) tea.Cmd {
	a := m.asking
	if a.q.Kind == "plan" {
		return m.planKey(k)
	}
	if len(a.q.Questions) == 0 {
		return nil
	}
	it := a.q.Questions[a.item]
	rows := len(it.Options) + 1
	s := k.String()
	switch s {
	case "esc":
		return m.cancelTurn()
	case "up", "ctrl+p":
		a.cursor[a.item] = (a.cursor[a.item] + rows - 1) % rows
		return m.focusOther()
	case "down", "ctrl+n":
		a.cursor[a.item] = (a.cursor[a.item] + 1) % rows
		return m.focusOther()
	case "tab":
		a.item = (a.item + 1) % len(a.q.Questions)
		return m.focusOther()
	case "shift+tab":
		a.item = (a.item + len(a.q.Questions) - 1) % len(a.q.Questions)
		return m.focusOther()
	case "enter":
		return m.takeItem()
	}
	if a.onOther() {
		if s == "space" && !it.MultiSelect && a.other[a.item].Value() == "" {
			return nil
		}
		var cmd tea.Cmd
		a.other[a.item], cmd = a.other[a.item].Update(k)
		if strings.TrimSpace(a.other[a.item].Value()) != "" {
			a.chosen[a.item] = map[int]bool{}
		}
		return cmd
	}
	if s == "space" {
		m.choose(a.cursor[a.item])
		return nil
	}
	if len(s) == 1 && s[0] >= '1' && s[0] <= '9' {
		n := int(s[0] - '1')
		if n >= len(it.Options) {
			return nil
		}
		a.cursor[a.item] = n
		m.choose(n)
		if !it.MultiSelect {
			return m.advance()
		}
	}
	return nil
}

// choose selects option n of the shown item: the only choice of a
// single-select item, a toggle of a multi-select one.
func (m *model) choose(n int) {
	a := m.asking
	it := a.q.Questions[a.item]
	a.other[a.item].Reset()
	if it.MultiSelect {
		if a.chosen[a.item][n] {
			delete(a.chosen[a.item], n)
		} else {
			a.chosen[a.item][n] = true
		}
		return
	}
	a.chosen[a.item] = map[int]bool{n: true}
}

// takeItem is enter: the row under the cursor becomes the answer of a
// single-select item that has none (a multi-select one keeps its
// toggles), then the panel goes on.
func (m *model) takeItem() tea.Cmd {
	a := m.asking
	it := a.q.Questions[a.item]
	// Enter on an option of a single-select item takes that option; on a
	// multi-select item it takes the option only when none is toggled.
	if !a.onOther() && (!a.answered(a.item) || !it.MultiSelect && !a.chosen[a.item][a.cursor[a.item]]) {
		m.choose(a.cursor[a.item])
	}
	if !a.answered(a.item) {
		m.hint = "choose an option or type an answer"
		return nil
	}
	return m.advance()
}

// advance goes to the next unanswered item, or submits when all are.
func (m *model) advance() tea.Cmd {
	a := m.asking
	m.hint = ""
	for i := 1; i <= len(a.q.Questions); i++ {
		j := (a.item + i) % len(a.q.Questions)
		if !a.answered(j) {
			a.item = j
			return m.focusOther()
		}
	}
	return m.submitQuestion(host.QuestionAnswer{Answers: a.answers()})
}

// focusOther gives the "Other" field the caret while the cursor is on it.
func (m *model) focusOther() tea.Cmd {
	a := m.asking
	for i := range a.other {
		a.other[i].Blur()
	}
	if a.onOther() {
		return a.other[a.item].Focus()
	}
	return nil
}

func (m *model) planKey(k tea.KeyPressMsg) tea.Cmd {
	a := m.asking
	if a.feedback != nil {
		switch k.String() {
		case "enter":
			fb := strings.TrimSpace(a.feedback.Value())
			if fb == "" {
				m.hint = "say what to change in the plan (esc goes back)"
				return nil
			}
			no := false
			return m.submitQuestion(host.QuestionAnswer{Approve: &no, Feedback: fb})
		case "esc":
			a.feedback = nil
			return nil
		}
		var cmd tea.Cmd
		*a.feedback, cmd = a.feedback.Update(k)
		return cmd
	}
	switch k.String() {
	case "y", "Y", "a", "A":
		return m.approvePlan()
	case "n", "N", "k", "K", "e", "E":
		ta := oneLine("what should change in the plan?", m.width)
		ta.Focus()
		a.feedback = &ta
	case "left", "right", "tab", "shift+tab", "h", "l":
		a.approveFocus = !a.approveFocus
	case "up", "ctrl+p":
		a.scroll = max(a.scroll-1, 0)
	case "down", "ctrl+n":
		a.scroll++
	case "pgup":
		a.scroll = max(a.scroll-m.planRows(), 0)
	case "pgdown":
		a.scroll += m.planRows()
	case "enter":
		if a.approveFocus {
			return m.approvePlan()
		}
		ta := oneLine("what should change in the plan?", m.width)
		ta.Focus()
		a.feedback = &ta
	case "esc":
		return m.cancelTurn()
	}
	return nil
}

func (m *model) approvePlan() tea.Cmd {
	yes := true
	return m.submitQuestion(host.QuestionAnswer{Approve: &yes})
}

// planRows is how many rows of the plan the panel shows: about half the
// screen, so that what is printed above the live area still has room
// (see flush); the rest scrolls.
func (m *model) planRows() int { return max(m.height/2-2, 4) }

// viewQuestion draws the panel of the first pending question or plan.
func (m *model) viewQuestion() string {
	a := m.asking
	t := m.th
	inner := max(m.width-4, 16)
	var lines []string
	title := "dsh asks"
	if a.q.Kind == "plan" {
		title = "Plan ready for review"
	}
	if a.q.SessionID != m.id {
		title += t.dim.Render(" (subagent " + shortID(a.q.SessionID) + ")")
	}
	if n := len(m.questions) - 1; n > 0 {
		title += t.dim.Render(fmt.Sprintf(" · %d more waiting", n))
	}
	lines = append(lines, t.modalTitle.Render(title))
	if a.q.Kind == "plan" {
		lines = append(lines, m.viewPlan(inner)...)
	} else {
		lines = append(lines, m.viewItems(inner)...)
	}
	return t.modal.Width(min(m.width, inner+4)).Render(strings.Join(lines, "\n"))
}

func (m *model) viewItems(inner int) []string {
	a, t := m.asking, m.th
	var lines []string
	if len(a.q.Questions) > 1 {
		var tabs []string
		for i, it := range a.q.Questions {
			name := orDefault(it.Header, fmt.Sprintf("Q%d", i+1))
			if a.answered(i) {
				name = "✓ " + name
			}
			if i == a.item {
				tabs = append(tabs, t.selected.Render(" "+name+" "))
			} else {
				tabs = append(tabs, t.dim.Render(" "+name+" "))
			}
		}
		lines = append(lines, cut(strings.Join(tabs, " "), inner))
	}
	if len(a.q.Questions) == 0 {
		return append(lines, t.dim.Render("(no questions)"))
	}
	it := a.q.Questions[a.item]
	q := progress.Clean(it.Question)
	// Descriptions give way when the panel would not fit the screen.
	describe := len(it.Options)*2+8 < m.height
	if it.Header != "" && len(a.q.Questions) == 1 {
		lines = append(lines, t.accent.Render(cut(strings.ToUpper(progress.Clean(it.Header)), inner)))
	}
	lines = append(lines, indent(t.bold.Render(q), inner, "", ""), "")
	for j, o := range it.Options {
		mark := fmt.Sprintf("%d.", j+1)
		if it.MultiSelect {
			box := "[ ]"
			if a.chosen[a.item][j] {
				box = "[x]"
			}
			mark = box + " " + mark
		} else if a.chosen[a.item][j] {
			mark = "● " + mark
		} else {
			mark = "○ " + mark
		}
		row := mark + " " + progress.Clean(o.Label)
		if a.cursor[a.item] == j {
			lines = append(lines, t.selected.Render(cut("› "+row, inner)))
		} else {
			lines = append(lines, cut("  "+row, inner))
		}
		if d := strings.TrimSpace(o.Description); d != "" && describe {
			pad := strings.Repeat(" ", 3+ansi.StringWidth(mark)) // under the label
			lines = append(lines, indent(t.dim.Render(progress.Clean(d)), inner, pad, pad))
		}
	}
	other := a.other[a.item].Value()
	label := "Other: "
	if a.onOther() {
		lines = append(lines, t.selected.Render("› "+label)+other+"▏")
	} else if other != "" {
		lines = append(lines, "  "+label+other)
	} else {
		lines = append(lines, t.dim.Render("  "+label+"type your own answer"))
	}
	keys := "↑↓ move · 1-9 choose · enter next"
	if it.MultiSelect {
		keys = "↑↓ move · space or 1-9 toggle · enter next"
	}
	if len(a.q.Questions) > 1 {
		keys += " · tab other question"
	}
	keys += " · esc cancels"
	lines = append(lines, "", t.dim.Render(wrap(keys, inner)))
	return lines
}

func (m *model) viewPlan(inner int) []string {
	a, t := m.asking, m.th
	plan := strings.Split(t.markdown(progress.Clean(strings.TrimSpace(a.q.Plan)), inner-2), "\n")
	rows := m.planRows()
	a.scroll = min(a.scroll, max(len(plan)-rows, 0))
	end := min(a.scroll+rows, len(plan))
	var lines []string
	if a.scroll > 0 {
		lines = append(lines, t.dim.Render(fmt.Sprintf("⋮ %d lines above", a.scroll)))
	}
	lines = append(lines, plan[a.scroll:end]...)
	if end < len(plan) {
		lines = append(lines, t.dim.Render(fmt.Sprintf("⋮ %d lines below · ↑↓ pgup/pgdn scroll", len(plan)-end)))
	}
	approve, keep := "  Approve  ", "  Keep planning  "
	if a.approveFocus {
		approve = t.selected.Render("› Approve ") + " "
	} else {
		keep = t.selected.Render("› Keep planning ") + " "
	}
	lines = append(lines, "", approve+"  "+keep)
	if a.feedback != nil {
		lines = append(lines, "feedback: "+a.feedback.Value()+"▏", t.dim.Render(cut("enter sends it and the agent keeps planning · esc goes back", inner)))
	} else {
		lines = append(lines, t.dim.Render(wrap("y approve · n keep planning with feedback · enter chooses · esc cancels the turn", inner)))
	}
	return lines
}

// focusQuestion gives the caret to the panel's text field, if it has
// one under the cursor (a question that arrived while another was shown
// starts blurred).
func (m *model) focusQuestion() tea.Cmd {
	if m.asking == nil || m.asking.q.Kind == "plan" {
		return nil
	}
	return m.focusOther()
}

// pasteAnswer puts pasted text into the panel's text field: the plan's
// feedback, or the "Other" answer (the cursor moves there).
func (m *model) pasteAnswer(p tea.PasteMsg) tea.Cmd {
	a := m.asking
	var cmd tea.Cmd
	switch {
	case a.q.Kind == "plan":
		if a.feedback == nil {
			ta := oneLine("what should change in the plan?", m.width)
			ta.Focus()
			a.feedback = &ta
		}
		*a.feedback, cmd = a.feedback.Update(p)
	case len(a.q.Questions) > 0:
		it := a.q.Questions[a.item]
		a.cursor[a.item] = len(it.Options)
		focus := m.focusOther()
		a.other[a.item], cmd = a.other[a.item].Update(p)
		if strings.TrimSpace(a.other[a.item].Value()) != "" {
			a.chosen[a.item] = map[int]bool{}
		}
		cmd = tea.Batch(focus, cmd)
	}
	return cmd
}

// togglePlan is /plan: plan mode on or off (no argument: the other way
// from what the log says). The host logs the change at the next step
// boundary, and the status line follows the log.
func (m *model) togglePlan(arg string) tea.Cmd {
	active := !m.st.planMode
	switch strings.ToLower(arg) {
	case "":
	case "on":
		active = true
	case "off":
		active = false
	default:
		m.say(bError, "/plan takes on or off, or nothing to toggle")
		return m.flush()
	}
	b, ctx, id, running := m.b, m.ctx, m.id, m.st.running
	return func() tea.Msg {
		if err := b.SetPlanMode(ctx, id, active); err != nil {
			return doneMsg{err: err}
		}
		if running {
			return doneMsg{notice: "plan mode " + onOff(active) + " from the next step"}
		}
		return nil
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
