package tui

import (
	"context"
	"errors"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/session"
)

// exitWindow is how soon a second Ctrl-C must follow the first to exit.
const exitWindow = 2 * time.Second

// frame is the shortest interval between two reads of the log: one
// frame of Bubble Tea's 60 Hz renderer.
const frame = time.Second / 60

// tickEvery paces the spinner and elapsed times; it only runs while
// something is at work, so an idle UI wakes for nothing.
const tickEvery = 150 * time.Millisecond

// Options configure the UI.
type Options struct {
	Backend Backend
	// Open says which session to start with.
	Open OpenRequest
	// AltScreen draws full-screen instead of inline.
	AltScreen bool
	// Color is false under NO_COLOR.
	Color bool
	// Cwd is the directory sessions are opened in and @paths are
	// completed from.
	Cwd string
	// Home is $DSH_HOME (user skills).
	Home string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Cols and Rows size an output that is no terminal (benchmarks);
	// a terminal's own size is used otherwise.
	Cols, Rows int
}

// Messages.
type (
	eventsMsg struct {
		s      *owned[session.Event]
		events []session.Event
		err    error
	}
	feedMsg struct {
		f      *owned[host.FeedEvent]
		events []host.FeedEvent
		err    error
	}
	// childMsg carries a followed child's events (or, first, its
	// stream).
	childMsg struct {
		run    string
		s      *owned[session.Event]
		events []session.Event
		err    error
	}
	approvalsMsg struct{ list []host.Approval }
	tickMsg      struct{}
	printedMsg   struct{}
	// doneMsg reports the end of a backend call a command started.
	doneMsg struct {
		notice string
		err    error
	}
	switchMsg struct {
		info   host.Info
		stream EventStream
		err    error
	}
)

// model is the Bubble Tea model of the UI.
type model struct {
	ctx   context.Context
	o     Options
	b     Backend
	th    theme
	now   func() time.Time
	width int
	// height is the terminal's; the live area never takes more.
	height int

	id     string
	st     *state
	stream *owned[session.Event]
	feed   *owned[host.FeedEvent]
	// followed are the logs of the running children, by run id, for
	// their model and tokens (nil while one is being opened).
	followed map[string]*owned[session.Event]
	// kin are the sessions whose approvals this UI answers: its own and
	// the subagent children its log started.
	kin map[string]bool

	approvals []host.Approval
	denyFocus bool
	feedback  *textarea.Model
	// questions are the pending questions and plans of the kin sessions,
	// oldest first; asking is the panel of the first.
	questions []host.Question
	asking    *asking

	composer textarea.Model
	history  []string
	histPos  int
	hint     string
	ctrlCAt  time.Time
	expand   bool
	ticking  bool

	// pending holds finished blocks not yet printed; printing is set
	// while one print is in flight, so the scrollback keeps log order.
	pending  []string
	printing bool
	// blankAbove is set while the row above the live area is the blank
	// line Run printed before the UI started: the first print leaves out
	// the blank line it opens with (see Run).
	blankAbove bool
	// frames are the heights of the frames drawn lately: a print plus
	// the frame the renderer last put on the screen must fit it (see
	// flush), and that frame may be a few draws old.
	frames []frameRow
	// transcript keeps what was printed, for the alt-screen view only.
	transcript []string
	scroll     int

	overlay *overlay
	// startCmds are run by Init (following children a resumed session
	// has running).
	startCmds []tea.Cmd
	quitting  bool
	exitCode  int
	liveKey   liveCache
}

// liveCache keeps the last render of the streaming text.
type liveCache struct {
	n, width, room int
	out            string
}

func newModel(ctx context.Context, o Options, info host.Info, stream EventStream, feed FeedStream) *model {
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &model{ctx: ctx, o: o, b: o.Backend, th: newTheme(o.Color), now: o.Now, width: 80, height: 24,
		id: info.Header.ID, st: newState(), stream: own(ctx, streamer[session.Event](stream)),
		followed: map[string]*owned[session.Event]{},
		kin:      map[string]bool{info.Header.ID: true}, denyFocus: true, histPos: -1}
	if feed != nil {
		m.feed = own(ctx, streamer[host.FeedEvent](feed))
	}
	m.composer = newComposer()
	// Sized now, the composer's first frame is its one row, not the
	// textarea's default six rows that shrink when the terminal's size
	// arrives (a redraw of the whole live area as dsh starts).
	m.composer.SetWidth(max(m.width-2, 10))
	return m
}

func newComposer() textarea.Model {
	ta := textarea.New()
	ta.Placeholder = "Ask dsh… (/help for commands)"
	ta.ShowLineNumbers = false
	ta.Prompt = ""
	ta.DynamicHeight = true
	ta.MinHeight = 1
	ta.MaxHeight = 8
	// Long pastes are welcome: only the view is capped at MaxHeight rows.
	ta.MaxContentHeight = 1 << 20
	ta.CharLimit = 0
	ta.SetVirtualCursor(false)
	ta.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("ctrl+j", "shift+enter", "alt+enter"))
	ta.Focus()
	return ta
}

// Init starts reading the log and the feed.
func (m *model) Init() tea.Cmd {
	return tea.Batch(append([]tea.Cmd{m.waitEvents(), m.waitFeed(), m.loadApprovals(), m.loadQuestions(), m.tick()}, m.startCmds...)...)
}

func (m *model) waitEvents() tea.Cmd {
	s, ctx := m.stream, m.ctx
	return func() tea.Msg {
		// A streaming answer appends an event every few milliseconds;
		// reading at most once a frame lets them gather into one batch,
		// so the live area is folded and drawn once per frame, not once
		// per chunk. The pause is pacing only: nothing waits on it.
		t := time.NewTimer(frame)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		ev, err := s.wait()
		return eventsMsg{s: s, events: ev, err: err}
	}
}

func (m *model) waitFeed() tea.Cmd {
	if m.feed == nil {
		return nil
	}
	f := m.feed
	return func() tea.Msg {
		ev, err := f.wait()
		return feedMsg{f: f, events: ev, err: err}
	}
}

// followChild starts following a running child's log.
func (m *model) followChild(run, id string) tea.Cmd {
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		s, err := b.Follow(ctx, id, -1)
		if err != nil {
			return childMsg{run: run, err: err}
		}
		return childMsg{run: run, s: own(ctx, streamer[session.Event](s))}
	}
}

func waitChild(run string, s *owned[session.Event]) tea.Cmd {
	return func() tea.Msg {
		ev, err := s.wait()
		return childMsg{run: run, s: s, events: ev, err: err}
	}
}

// onChild folds a child's events into its row: the model it runs and
// the tokens it has used so far.
func (m *model) onChild(msg childMsg) tea.Cmd {
	if msg.s == nil {
		return nil // the child could not be followed: its row shows less
	}
	c, ok := m.st.children[msg.run]
	if cur := m.followed[msg.run]; !ok || (cur != nil && cur != msg.s) {
		msg.s.close() // the child ended (or the UI left the session)
		return nil
	}
	m.followed[msg.run] = msg.s
	for _, e := range msg.events {
		switch e.Type {
		case session.TypeRequestHeader:
			var p session.RequestHeader
			if e.Decode(&p) == nil && p.Header.Config.Model != "" {
				c.model = p.Header.Config.Provider + "/" + p.Header.Config.Model
			}
		case session.TypeRequestContext:
			var p session.RequestContext
			if e.Decode(&p) == nil && p.Model != "" {
				c.model = p.Provider + "/" + p.Model
			}
		case session.TypeAssistantMsg:
			var p session.AssistantMessage
			if e.Decode(&p) == nil && p.Usage != nil {
				c.usage.Add(*p.Usage)
			}
		}
	}
	if msg.err != nil {
		delete(m.followed, msg.run)
		msg.s.close()
		return nil
	}
	return waitChild(msg.run, msg.s)
}

// stopChildren stops following children that have ended.
func (m *model) stopChildren() {
	for run, s := range m.followed {
		if _, ok := m.st.children[run]; !ok {
			delete(m.followed, run)
			if s != nil {
				s.cancel() // its read returns, and onChild closes it
			}
		}
	}
}

func (m *model) loadApprovals() tea.Cmd {
	b, ctx := m.b, m.ctx
	return func() tea.Msg {
		list, err := b.Approvals(ctx)
		if err != nil {
			return doneMsg{err: err}
		}
		return approvalsMsg{list}
	}
}

// Update handles one message.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = max(msg.Width, 20), max(msg.Height, 6)
		m.composer.SetWidth(max(m.width-2, 10))
		return m, nil
	case eventsMsg:
		return m, m.onEvents(msg)
	case feedMsg:
		return m, m.onFeed(msg)
	case approvalsMsg:
		for _, a := range msg.list {
			m.addApproval(a)
		}
		return m, nil
	case questionsMsg:
		for _, q := range msg.list {
			m.addQuestion(q)
		}
		return m, m.focusQuestion()
	case tickMsg:
		m.ticking = false
		return m, m.tick()
	case printedMsg:
		m.printing = false
		return m, m.flush()
	case doneMsg:
		if msg.err != nil {
			m.say(bError, msg.err.Error())
		} else if msg.notice != "" {
			m.say(bNotice, msg.notice)
		}
		return m, m.flush()
	case childMsg:
		return m, m.onChild(msg)
	case unqueuedMsg:
		if m.composer.Value() == "" {
			m.composer.SetValue(msg.text)
		} else {
			m.composer.InsertString("\n" + msg.text)
		}
		return m, nil
	case reopenedMsg:
		return m, m.onReopened(msg)
	case switchMsg:
		return m, m.onSwitch(msg)
	case overlayMsg:
		return m, m.onOverlay(msg)
	case searchMsg:
		m.onSearch(msg)
		return m, nil
	case tea.PasteMsg:
		return m, m.onPaste(msg)
	case tea.KeyPressMsg:
		return m, m.onKey(msg)
	}
	var cmd tea.Cmd
	m.composer, cmd = m.composer.Update(msg)
	return m, cmd
}

// onEvents folds a batch of log events and prints what they finish.
func (m *model) onEvents(msg eventsMsg) tea.Cmd {
	if msg.s != m.stream {
		msg.s.close() // a stream of a session the UI has left
		return nil
	}
	var cmds []tea.Cmd
	for _, e := range msg.events {
		m.commit(m.st.apply(e)...)
		if e.Type == session.TypeSubagentStart {
			for run, c := range m.st.children {
				if !m.kin[c.childID] {
					m.kin[c.childID] = true
					m.followed[run] = nil // being opened
					cmds = append(cmds, m.followChild(run, c.childID))
				}
			}
		}
	}
	m.stopChildren()
	cmds = append(cmds, m.flush(), m.tick())
	if msg.err != nil {
		if m.ctx.Err() == nil && !errors.Is(msg.err, context.Canceled) {
			m.say(bError, "the session stream ended: "+msg.err.Error())
		}
		return tea.Batch(cmds...)
	}
	return tea.Batch(append(cmds, m.waitEvents())...)
}

func (m *model) onFeed(msg feedMsg) tea.Cmd {
	if msg.f != m.feed {
		msg.f.close()
		return nil
	}
	for _, e := range msg.events {
		switch e.Type {
		case host.FeedApprovalPending:
			if e.Approval != nil {
				m.addApproval(*e.Approval)
			}
		case host.FeedApprovalResolved:
			m.dropApproval(e.ApprovalID)
		case host.FeedQuestion:
			if e.Question != nil {
				m.addQuestion(*e.Question)
			}
		case host.FeedQuestionResolved:
			m.dropQuestion(e.ID)
		}
	}
	if msg.err != nil {
		if m.ctx.Err() != nil {
			return nil
		}
		if !errors.Is(msg.err, host.ErrFeedOverflow) {
			m.say(bError, "the host feed ended: "+msg.err.Error())
			return m.flush()
		}
		// Dropped for falling behind: subscribe again and rebuild the
		// pending approvals from the host's queue.
		m.feed.close()
		f, err := m.b.Feed(m.ctx)
		if err != nil {
			m.feed = nil
			m.say(bError, "the host feed: "+err.Error())
			return m.flush()
		}
		m.feed, m.approvals, m.questions, m.asking = own(m.ctx, streamer[host.FeedEvent](f)), nil, nil, nil
		return tea.Batch(m.waitFeed(), m.loadApprovals(), m.loadQuestions())
	}
	return tea.Batch(m.waitFeed(), m.focusQuestion())
}

func (m *model) addApproval(a host.Approval) {
	if !m.kin[a.SessionID] {
		return
	}
	for _, x := range m.approvals {
		if x.ID == a.ID {
			return
		}
	}
	if len(m.approvals) == 0 {
		m.denyFocus = true
	}
	m.approvals = append(m.approvals, a)
}

func (m *model) dropApproval(id string) {
	for i, x := range m.approvals {
		if x.ID == id {
			m.approvals = append(m.approvals[:i:i], m.approvals[i+1:]...)
			if i == 0 {
				m.denyFocus, m.feedback = true, nil
			}
			return
		}
	}
}

// commit renders finished blocks for the scrollback.
func (m *model) commit(bs ...block) {
	for _, b := range bs {
		m.pending = append(m.pending, m.th.renderBlock(b, m.width, m.expand))
	}
}

// say adds a UI notice (not from the log: an answer to a command).
func (m *model) say(k blockKind, text string) { m.commit(block{kind: k, text: text}) }

// flush prints the pending blocks, one print in flight at a time so the
// scrollback keeps their order. Bubble Tea inserts a print above the
// frame by scrolling and inserting lines on the visible screen, so a
// print that is taller than the screen less the frame would push its
// own last lines off the bottom, where they are lost: a long block is
// printed in slices that fit, one after another.
func (m *model) flush() tea.Cmd {
	if m.printing || len(m.pending) == 0 {
		return nil
	}
	text := strings.Join(m.pending, "\n")
	m.pending = nil
	if m.o.AltScreen {
		m.transcript = append(m.transcript, strings.Split(text, "\n")...)
		return nil
	}
	if m.blankAbove {
		m.blankAbove = false
		text = strings.TrimPrefix(text, "\n")
		if text == "" {
			return nil
		}
	}
	lines := strings.Split(text, "\n")
	fit := max(min(m.height/2-1, m.height-max(m.recentRows(), m.frameRows())-1), 1)
	if rows := printedRows(lines, m.width); rows > fit {
		n := 0
		for used := 0; n < len(lines); n++ {
			r := printedRows(lines[n:n+1], m.width)
			if used+r > fit && n > 0 {
				break
			}
			used += r
		}
		text = strings.Join(lines[:n], "\n")
		m.pending = []string{strings.Join(lines[n:], "\n")}
	}
	m.printing = true
	return tea.Sequence(tea.Println(text), func() tea.Msg { return printedMsg{} })
}

// frameRow is one drawn frame's height and time.
type frameRow struct {
	at   time.Time
	rows int
}

// recentWindow is how far back a drawn frame may still be what the
// renderer shows: several of its 60 Hz frames.
const recentWindow = 250 * time.Millisecond

// noteFrame records a drawn frame's height.
func (m *model) noteFrame(rows int) {
	now := time.Now()
	keep := m.frames[:0]
	for _, f := range m.frames {
		if now.Sub(f.at) < recentWindow {
			keep = append(keep, f)
		}
	}
	m.frames = append(keep, frameRow{now, rows})
}

// recentRows is the tallest frame drawn within recentWindow.
func (m *model) recentRows() int {
	n := 0
	now := time.Now()
	for _, f := range m.frames {
		if now.Sub(f.at) < recentWindow {
			n = max(n, f.rows)
		}
	}
	return n
}

// printedRows is how many screen rows lines take at width columns.
func printedRows(lines []string, width int) int {
	n := 0
	for _, l := range lines {
		n += 1 + max(ansi.StringWidth(l)-1, 0)/max(width, 1)
	}
	return n
}

// frameRows is the height of the frame View draws now.
func (m *model) frameRows() int {
	return strings.Count(m.liveTop(), "\n") + strings.Count(m.liveBottom(), "\n") + 2
}

// busy says whether anything is at work that shows elapsed time.
func (m *model) busy() bool {
	return m.st.running || len(m.st.children) > 0 || len(m.st.calls) > 0
}

// tick schedules the next spinner frame while something is at work.
func (m *model) tick() tea.Cmd {
	if m.ticking || !m.busy() {
		return nil
	}
	m.ticking = true
	return tea.Tick(tickEvery, func(time.Time) tea.Msg { return tickMsg{} })
}

// quit ends the program with code.
func (m *model) quit(code int) tea.Cmd {
	m.quitting, m.exitCode = true, code
	return tea.Quit
}

// closeStreams closes every stream the UI still follows (at exit).
func (m *model) closeStreams() {
	m.stream.close()
	if m.feed != nil {
		m.feed.close()
	}
	for _, f := range m.followed {
		if f != nil {
			f.close()
		}
	}
}
