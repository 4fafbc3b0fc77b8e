package tui

import (
	"encoding/base64"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"

	"github.com/dsh-dev/dsh/internal/host"
)

// maxImageBytes bounds an image attached from a pasted path.
const maxImageBytes = 20 << 20

// onKey handles a key press: the approval prompt and overlays first,
// then the global keys, then the composer.
func (m *model) onKey(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if s == "ctrl+c" {
		return m.interrupt()
	}
	// Any other key disarms the double Ctrl-C.
	m.ctrlCAt = time.Time{}
	if m.hint == hintExit {
		m.hint = ""
	}
	if len(m.approvals) > 0 {
		return m.approvalKey(k)
	}
	if m.asking != nil {
		return m.questionKey(k)
	}
	if m.overlay != nil {
		return m.overlayKey(k)
	}
	switch s {
	case "esc":
		if m.st.running {
			return m.cancelTurn()
		}
		m.hint = ""
		return nil
	case "ctrl+d":
		if m.composer.Value() == "" {
			return m.quit(0)
		}
	case "ctrl+o":
		m.expand = !m.expand
		return nil
	case "enter":
		return m.submit(host.DeliveryQueue)
	case "ctrl+s":
		return m.submit(host.DeliverySteer)
	case "tab":
		m.complete()
		return nil
	case "up":
		if m.composer.Line() == 0 {
			return m.historyUp()
		}
	case "down":
		if m.composer.Line() == m.composer.LineCount()-1 {
			return m.historyDown()
		}
	case "pgup":
		if m.o.AltScreen {
			m.scroll = min(m.scroll+max(m.height/2, 1), len(m.transcript))
			return nil
		}
	case "pgdown":
		if m.o.AltScreen {
			m.scroll = max(m.scroll-max(m.height/2, 1), 0)
			return nil
		}
	}
	var cmd tea.Cmd
	m.composer, cmd = m.composer.Update(k)
	return cmd
}

const hintExit = "press ctrl+c again to exit"

// interrupt is Ctrl-C: it cancels a running turn (keeping the partial
// answer, as dsh run does), else clears the composer; a second one within
// exitWindow exits with 130.
func (m *model) interrupt() tea.Cmd {
	now := m.now()
	if !m.ctrlCAt.IsZero() && now.Sub(m.ctrlCAt) < exitWindow {
		return m.quit(130)
	}
	m.ctrlCAt = now
	m.hint = hintExit
	switch {
	case m.st.running || len(m.approvals) > 0 || m.asking != nil:
		return m.cancelTurn()
	case m.overlay != nil:
		m.overlay = nil
	default:
		m.composer.Reset()
	}
	return nil
}

func (m *model) cancelTurn() tea.Cmd {
	b, ctx, id := m.b, m.ctx, m.id
	return func() tea.Msg {
		if err := b.Cancel(ctx, id); err != nil {
			return doneMsg{err: err}
		}
		return nil
	}
}

// approvalKey answers the first pending approval: y allows once, n
// denies, e denies with feedback typed next; Enter takes the focused
// choice, which starts on deny.
func (m *model) approvalKey(k tea.KeyPressMsg) tea.Cmd {
	a := m.approvals[0]
	if m.feedback != nil {
		switch k.String() {
		case "enter":
			fb := strings.TrimSpace(m.feedback.Value())
			return m.answer(a, host.Answer{Decision: host.DecisionReject, Feedback: fb})
		case "esc":
			m.feedback = nil
			return nil
		}
		var cmd tea.Cmd
		*m.feedback, cmd = m.feedback.Update(k)
		return cmd
	}
	switch k.String() {
	case "y", "Y":
		return m.answer(a, host.Answer{Decision: host.DecisionAllowOnce})
	case "a", "A":
		// Only where the host can grant it: the same exact bash command
		// for the rest of the session.
		if sessionGrantable(a) {
			return m.answer(a, host.Answer{Decision: host.DecisionAllowSession})
		}
	case "n", "N":
		return m.answer(a, host.Answer{Decision: host.DecisionReject})
	case "e", "E":
		ta := textarea.New()
		ta.Placeholder = "what should the model do instead?"
		ta.ShowLineNumbers, ta.Prompt = false, ""
		ta.SetHeight(1)
		ta.SetWidth(max(m.width-8, 10))
		ta.SetVirtualCursor(false)
		ta.Focus()
		m.feedback = &ta
	case "left", "right", "tab", "shift+tab", "h", "l":
		m.denyFocus = !m.denyFocus
	case "enter":
		if m.denyFocus {
			return m.answer(a, host.Answer{Decision: host.DecisionReject})
		}
		return m.answer(a, host.Answer{Decision: host.DecisionAllowOnce})
	case "esc":
		return m.cancelTurn()
	}
	return nil
}

func (m *model) answer(a host.Approval, ans host.Answer) tea.Cmd {
	m.dropApproval(a.ID)
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		if err := b.Answer(ctx, a.SessionID, a.ID, ans); err != nil && host.ErrorCode(err) != host.CodeApprovalNotPending {
			return doneMsg{err: err}
		}
		return nil
	}
}

// submit sends the composer's text: a slash command runs; a message
// starts a turn when idle, is queued while a turn runs, or steers the
// running turn (Ctrl-S).
func (m *model) submit(d host.Delivery) tea.Cmd {
	text := strings.TrimSpace(m.composer.Value())
	if text == "" {
		return nil
	}
	m.composer.Reset()
	m.hint = ""
	if len(m.history) == 0 || m.history[len(m.history)-1] != text {
		m.history = append(m.history, text)
	}
	m.histPos = -1
	if strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "//") {
		return m.command(text)
	}
	b, ctx, id, cwd := m.b, m.ctx, m.id, m.o.Cwd
	return func() tea.Msg {
		t, images := withImages(text, cwd)
		if err := b.Send(ctx, id, t, images, d); err != nil {
			return doneMsg{err: err}
		}
		return nil
	}
}

// historyUp takes the last queued message back from the host's queue
// for editing, else walks the history.
func (m *model) historyUp() tea.Cmd {
	if q := m.st.queue; m.composer.Value() == "" && m.st.running && len(q) > 0 {
		last := q[len(q)-1]
		b, ctx, id := m.b, m.ctx, m.id
		return func() tea.Msg {
			if err := b.UpdateQueue(ctx, id, last.ID, host.QueueRemove); err != nil {
				return doneMsg{err: err}
			}
			return unqueuedMsg{text: last.Text()}
		}
	}
	if len(m.history) == 0 {
		return nil
	}
	switch {
	case m.histPos < 0:
		m.histPos = len(m.history) - 1
	case m.histPos > 0:
		m.histPos--
	}
	m.composer.SetValue(m.history[m.histPos])
	return nil
}

func (m *model) historyDown() tea.Cmd {
	if m.histPos < 0 {
		return nil
	}
	m.histPos++
	if m.histPos >= len(m.history) {
		m.histPos = -1
		m.composer.Reset()
		return nil
	}
	m.composer.SetValue(m.history[m.histPos])
	return nil
}

// onPaste inserts pasted text; a pasted path of an image file (what a
// terminal pastes for a dropped file) becomes an @path the message
// attaches when it is sent.
func (m *model) onPaste(p tea.PasteMsg) tea.Cmd {
	if len(m.approvals) == 0 && m.asking != nil {
		return m.pasteAnswer(p)
	}
	if m.feedback != nil {
		var cmd tea.Cmd
		*m.feedback, cmd = m.feedback.Update(p)
		return cmd
	}
	text := strings.TrimSpace(p.Content)
	if path := unquotePath(text); isImagePath(path) {
		if _, err := os.Stat(path); err == nil {
			m.composer.InsertString("@" + path + " ")
			return nil
		}
	}
	var cmd tea.Cmd
	m.composer, cmd = m.composer.Update(p)
	return cmd
}

func unquotePath(s string) string {
	s = strings.Trim(s, `'"`)
	s = strings.ReplaceAll(s, `\ `, " ")
	return strings.TrimPrefix(s, "file://")
}

func isImagePath(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp":
		return !strings.ContainsAny(p, "\n")
	}
	return false
}

// withImages attaches every @path naming an image file (relative to cwd)
// to the message; the text keeps the reference.
func withImages(text, cwd string) (string, []Image) {
	var images []Image
	for _, w := range strings.Fields(text) {
		if !strings.HasPrefix(w, "@") || !isImagePath(w[1:]) {
			continue
		}
		p := w[1:]
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Size() > maxImageBytes {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		mt := mime.TypeByExtension(strings.ToLower(filepath.Ext(p)))
		images = append(images, Image{MediaType: mt, Data: base64.StdEncoding.EncodeToString(data)})
	}
	return text, images
}

// complete completes the @path under the cursor (the composer's last
// word): one match is filled in, several to their common prefix, and the
// hint lists them.
func (m *model) complete() {
	v := m.composer.Value()
	i := strings.LastIndexAny(v, " \n\t") + 1
	word := v[i:]
	if !strings.HasPrefix(word, "@") {
		if strings.HasPrefix(v, "/") && !strings.ContainsAny(v, " \n") {
			m.completeCommand(v)
		}
		return
	}
	matches := pathMatches(m.o.Cwd, word[1:])
	switch len(matches) {
	case 0:
		m.hint = "no file matches " + word
		return
	case 1:
		m.composer.SetValue(v[:i] + "@" + matches[0])
		m.hint = ""
		return
	}
	m.composer.SetValue(v[:i] + "@" + commonPrefix(matches))
	if len(matches) > 8 {
		matches = append(matches[:8], "…")
	}
	m.hint = strings.Join(matches, "  ")
}

// pathMatches lists the entries of prefix's directory that start with
// its base name (directories with a trailing slash), hidden ones only
// when asked for.
func pathMatches(cwd, prefix string) []string {
	dir, base := filepath.Split(prefix)
	abs := dir
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(cwd, dir)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, base) || (strings.HasPrefix(n, ".") && !strings.HasPrefix(base, ".")) {
			continue
		}
		if e.IsDir() {
			n += "/"
		}
		out = append(out, dir+n)
	}
	slices.Sort(out)
	return out
}

func commonPrefix(xs []string) string {
	p := xs[0]
	for _, x := range xs[1:] {
		for !strings.HasPrefix(x, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}

// sessionGrantable says whether an approval can be answered "allow for
// the session": the host records such a grant for bash commands only.
func sessionGrantable(a host.Approval) bool { return a.ToolName == "bash" && a.Command != "" }

// unqueuedMsg brings a message taken back from the queue to the
// composer.
type unqueuedMsg struct{ text string }
