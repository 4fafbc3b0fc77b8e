package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/skills"
)

// slashCommand is one built-in command.
type slashCommand struct {
	name, args, help string
}

var commands = []slashCommand{
	{"model", "PROVIDER/MODEL", "switch this session's model"},
	{"effort", "off|low|high|max", "switch the reasoning effort"},
	{"permission", "PRESET", "switch the permission preset (read-only, workspace-write, auto, full-access)"},
	{"compact", "", "summarise the conversation to free context"},
	{"plan", "[on|off]", "toggle plan mode: the agent plans, writes nothing, and asks you to approve its plan"},
	{"goal", "[OBJECTIVE|pause|resume|clear]", "pursue OBJECTIVE over several rounds; alone: show the goal"},
	{"new", "", "start a new session in this directory"},
	{"sessions", "", "pick a stored session (tab: this directory / all; type to search)"},
	{"resume", "ID", "open a stored session"},
	{"tree", "", "the subagent tree of this session (enter: read a child's transcript)"},
	{"jobs", "", "the background jobs of this session"},
	{"export", "[FILE]", "write this session as JSONL"},
	{"help", "", "commands and keys"},
	{"exit", "", "leave (also ctrl+d on an empty composer)"},
}

// command runs a slash command line.
func (m *model) command(line string) tea.Cmd {
	name, arg, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "help":
		m.say(bNotice, m.helpText())
		return m.flush()
	case "exit", "quit":
		return m.quit(0)
	case "model", "effort", "permission":
		return m.reopen(name, arg)
	case "compact":
		if m.st.running {
			m.say(bError, "/compact waits for the turn to end")
			return m.flush()
		}
		b, ctx, id := m.b, m.ctx, m.id
		m.say(bNotice, "compacting…")
		return tea.Batch(m.flush(), func() tea.Msg {
			s, err := b.Compact(ctx, id)
			return doneMsg{notice: s, err: err}
		})
	case "plan":
		return m.togglePlan(arg)
	case "goal":
		return m.goalCommand(arg)
	case "new":
		r := OpenRequest{Cwd: m.o.Cwd, Model: m.o.Open.Model, Effort: m.o.Open.Effort, Permission: m.o.Open.Permission}
		return m.switchTo(r)
	case "resume":
		if arg == "" {
			return m.openSessions()
		}
		return m.switchTo(OpenRequest{Cwd: m.o.Cwd, ResumeID: arg})
	case "sessions":
		return m.openSessions()
	case "tree":
		return m.openTree()
	case "jobs":
		b, ctx, id := m.b, m.ctx, m.id
		return func() tea.Msg {
			jobs, err := b.Jobs(ctx, id)
			if err != nil {
				return doneMsg{err: err}
			}
			return doneMsg{notice: jobsText(jobs)}
		}
	case "export":
		return m.export(arg)
	}
	if sk, ok := m.skill(name); ok {
		return m.runSkill(sk, arg)
	}
	m.say(bError, fmt.Sprintf("unknown command /%s (/help lists them)", name))
	return m.flush()
}

func (m *model) helpText() string {
	var b strings.Builder
	b.WriteString("commands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  /%-22s %s\n", strings.TrimSpace(c.name+" "+c.args), c.help)
	}
	if sk := m.skills(); len(sk) > 0 {
		b.WriteString("skills:\n")
		for _, s := range sk {
			fmt.Fprintf(&b, "  /%-22s %s\n", s.Name, firstLineOf(s.Description))
		}
	}
	b.WriteString(`keys:
  enter send · ctrl+j or shift+enter newline · up/down history · tab completes @path
  while a turn runs: enter queues (up takes the last back) · ctrl+s steers the turn
  esc or ctrl+c cancels the turn · ctrl+c twice or ctrl+d exits · ctrl+o expands reasoning
  approval: y allow once · a allow the same bash command for the session · n deny
            e deny with feedback · enter takes the focused choice (deny first)
  question: ↑↓ move · 1-9 choose · space toggles (multi-select) · type on Other · enter next
  plan:     y approve · n keep planning with feedback · ↑↓ scroll`)
	return b.String()
}

// reopen switches the model, effort or permission preset of the session.
func (m *model) reopen(what, arg string) tea.Cmd {
	if arg == "" {
		cur := map[string]string{"model": m.st.provider + "/" + m.st.model, "effort": m.st.effort, "permission": m.st.preset}[what]
		m.say(bNotice, fmt.Sprintf("%s: %s (/%s VALUE switches)", what, orDefault(cur, "default"), what))
		return m.flush()
	}
	if m.st.running {
		m.say(bError, "/"+what+" waits for the turn to end")
		return m.flush()
	}
	// The other choices stay as the log says they are now.
	r := OpenRequest{Cwd: m.o.Cwd, Effort: m.st.effort, Permission: m.st.preset}
	if m.st.provider != "" && m.st.model != "" {
		r.Model = m.st.provider + "/" + m.st.model
	}
	switch what {
	case "model":
		r.Model = arg
	case "effort":
		r.Effort = arg
	default:
		r.Permission = arg
	}
	b, ctx, id := m.b, m.ctx, m.id
	return func() tea.Msg {
		if _, err := b.Reopen(ctx, id, r); err != nil {
			// A refused choice leaves the session stored, not live; the
			// next message resumes it with its own choices.
			return doneMsg{err: err}
		}
		return reopenedMsg{what: what, value: arg}
	}
}

// reopenedMsg reports a choice the host took; the status line shows it
// until the log's next request header says it again.
type reopenedMsg struct{ what, value string }

func (m *model) onReopened(msg reopenedMsg) tea.Cmd {
	switch msg.what {
	case "model":
		m.st.setModel(msg.value)
	case "effort":
		m.st.effort = msg.value
	default:
		m.st.preset = msg.value
	}
	m.say(bNotice, msg.what+" set to "+msg.value)
	return m.flush()
}

// switchTo opens another session and follows it from its start; its
// history is printed like the rest of the transcript.
func (m *model) switchTo(r OpenRequest) tea.Cmd {
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		info, err := b.Open(ctx, r)
		if err != nil {
			return switchMsg{err: err}
		}
		s, err := b.Follow(ctx, info.Header.ID, -1)
		return switchMsg{info: info, stream: s, err: err}
	}
}

func (m *model) onSwitch(msg switchMsg) tea.Cmd {
	if msg.err != nil {
		m.say(bError, msg.err.Error())
		return m.flush()
	}
	m.stream.cancel() // its read returns, and onEvents closes it
	for _, f := range m.followed {
		if f != nil {
			f.cancel()
		}
	}
	m.followed = map[string]*owned[session.Event]{}
	m.id, m.stream = msg.info.Header.ID, own(m.ctx, streamer[session.Event](msg.stream))
	m.st = newState()
	m.kin = map[string]bool{m.id: true}
	m.approvals, m.overlay, m.questions, m.asking = nil, nil, nil, nil
	m.say(bNotice, "── session "+m.id+" ──")
	return tea.Batch(m.flush(), m.waitEvents(), m.loadApprovals(), m.loadQuestions())
}

func (m *model) export(path string) tea.Cmd {
	if path == "" {
		path = "dsh-" + shortID(m.id) + ".jsonl"
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(m.o.Cwd, path)
	}
	b, ctx, id := m.b, m.ctx, m.id
	return func() tea.Msg {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return doneMsg{err: fmt.Errorf("export: %w", err)}
		}
		err = b.Export(ctx, id, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return doneMsg{err: fmt.Errorf("export: %w", err)}
		}
		return doneMsg{notice: "exported to " + path}
	}
}

func jobsText(jobs []host.JobInfo) string {
	if len(jobs) == 0 {
		return "no background jobs"
	}
	var b strings.Builder
	for i, j := range jobs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s  %-9s %s  %s", j.ID, j.Status, j.Kind, firstLineOf(orDefault(j.Summary, j.Command)))
	}
	return b.String()
}

// skills lists the user-invocable skills of the working directory.
func (m *model) skills() []skills.Skill {
	found, _ := skills.Discover(m.o.Cwd, skills.Options{Home: m.o.Home})
	return slices.DeleteFunc(found, func(s skills.Skill) bool { return !s.UserInvocable })
}

func (m *model) skill(name string) (skills.Skill, bool) {
	for _, s := range m.skills() {
		if s.Name == name {
			return s, true
		}
	}
	return skills.Skill{}, false
}

// runSkill sends the skill's instructions with the user's arguments, as
// the user's own message.
func (m *model) runSkill(s skills.Skill, args string) tea.Cmd {
	body, err := skills.Instructions(s)
	if err != nil {
		m.say(bError, fmt.Sprintf("skill %s: %v", s.Name, err))
		return m.flush()
	}
	text := fmt.Sprintf("/%s %s\n\n<skill name=%q>\n%s\n</skill>", s.Name, args, s.Name, body)
	if args == "" {
		text = fmt.Sprintf("/%s\n\n<skill name=%q>\n%s\n</skill>", s.Name, s.Name, body)
	}
	b, ctx, id := m.b, m.ctx, m.id
	d := host.DeliveryQueue
	return func() tea.Msg {
		if err := b.Send(ctx, id, text, nil, d); err != nil {
			return doneMsg{err: err}
		}
		return nil
	}
}

// completeCommand completes a partly typed /command.
func (m *model) completeCommand(v string) {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	for _, s := range m.skills() {
		names = append(names, s.Name)
	}
	var matches []string
	for _, n := range names {
		if strings.HasPrefix("/"+n, v) {
			matches = append(matches, "/"+n)
		}
	}
	switch len(matches) {
	case 0:
		m.hint = "no command starts with " + v
	case 1:
		m.composer.SetValue(matches[0] + " ")
		m.hint = ""
	default:
		m.composer.SetValue(commonPrefix(matches))
		m.hint = strings.Join(matches, "  ")
	}
}

// shortID is an id's first 13 characters: ids are UUIDv7, whose first 8
// are a timestamp that sessions made close together share; 13 tell them
// apart and still work as a prefix for --resume.
func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
