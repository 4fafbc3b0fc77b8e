package tui

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/dsh-dev/dsh/internal/goal"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

var update = flag.Bool("update", false, "rewrite the golden frames")

// fakeBackend records what the model asks of the host. The in-process
// tests drive the model's Update directly; the terminal tests drive the
// real binary over the real host.
type fakeBackend struct {
	mu       sync.Mutex
	sent     []sent
	cancels  int
	answers  []host.Answer
	rows     []catalog.Row
	events   map[string][]session.Event
	reopens  []OpenRequest
	queueOps []string
	pending  []host.Question
	qanswers []qanswer
	plans    []bool
	goals    []host.GoalRequest
}

type qanswer struct {
	id string
	a  host.QuestionAnswer
}

type sent struct {
	text string
	d    host.Delivery
}

func (f *fakeBackend) Open(context.Context, OpenRequest) (host.Info, error) {
	return host.Info{Header: session.Header{ID: "sess-1"}}, nil
}
func (f *fakeBackend) Get(context.Context, string) (host.Info, error) { return host.Info{}, nil }
func (f *fakeBackend) Follow(context.Context, string, int64) (EventStream, error) {
	return &chanStream{}, nil
}
func (f *fakeBackend) Feed(context.Context) (FeedStream, error)           { return nil, nil }
func (f *fakeBackend) Approvals(context.Context) ([]host.Approval, error) { return nil, nil }
func (f *fakeBackend) Send(_ context.Context, _ string, text string, _ []Image, d host.Delivery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, sent{text, d})
	return nil
}
func (f *fakeBackend) Events(_ context.Context, id string) ([]session.Event, error) {
	return f.events[id], nil
}
func (f *fakeBackend) Cancel(context.Context, string) error { f.cancels++; return nil }
func (f *fakeBackend) UpdateQueue(_ context.Context, _, messageID, op string) error {
	f.queueOps = append(f.queueOps, op+" "+messageID)
	return nil
}
func (f *fakeBackend) Answer(_ context.Context, _, _ string, a host.Answer) error {
	f.answers = append(f.answers, a)
	return nil
}
func (f *fakeBackend) Questions(context.Context) ([]host.Question, error) { return f.pending, nil }
func (f *fakeBackend) AnswerQuestion(_ context.Context, _, id string, a host.QuestionAnswer) error {
	f.qanswers = append(f.qanswers, qanswer{id, a})
	return nil
}
func (f *fakeBackend) SetPlanMode(_ context.Context, _ string, active bool) error {
	f.plans = append(f.plans, active)
	return nil
}
func (f *fakeBackend) Tree(context.Context, string) ([]catalog.Row, error) { return f.rows, nil }
func (f *fakeBackend) List(context.Context, string) ([]host.Info, error)   { return nil, nil }
func (f *fakeBackend) Export(context.Context, string, io.Writer) error     { return nil }
func (f *fakeBackend) Jobs(context.Context, string) ([]host.JobInfo, error) {
	return []host.JobInfo{{ID: "job-1", Kind: "bash", Command: "make", Status: "running"}}, nil
}
func (f *fakeBackend) Reopen(_ context.Context, _ string, r OpenRequest) (host.Info, error) {
	f.reopens = append(f.reopens, r)
	return host.Info{}, nil
}
func (f *fakeBackend) Compact(context.Context, string) (string, error) {
	return "nothing to compact", nil
}
func (f *fakeBackend) Goal(context.Context, string) (goal.State, error) {
	return goal.State{}, nil
}
func (f *fakeBackend) SetGoal(_ context.Context, _ string, r host.GoalRequest) (goal.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.goals = append(f.goals, r)
	return goal.State{}, nil
}
func (f *fakeBackend) Where() string                       { return "" }
func (f *fakeBackend) DefaultModel(context.Context) string { return "deepseek/deepseek-v4-flash" }

// chanStream yields nothing: the tests hand events to Update
// themselves, and the harness drops what its reads return.
type chanStream struct{}

func (chanStream) Next(context.Context) ([]session.Event, error) { return nil, io.EOF }
func (chanStream) Close()                                        {}

// harness is a model at a fixed size and clock, in alt-screen mode so
// what it prints is kept in its transcript.
type harness struct {
	t   *testing.T
	m   *model
	b   *fakeBackend
	now time.Time
	seq int64
}

func newHarness(t *testing.T, width, height int) *harness {
	h := &harness{t: t, b: &fakeBackend{events: map[string][]session.Event{}}, now: time.UnixMilli(1_000_000)}
	info, _ := h.b.Open(t.Context(), OpenRequest{})
	s, _ := h.b.Follow(t.Context(), "", -1)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	h.m = newModel(ctx, Options{Backend: h.b, AltScreen: true, Cwd: t.TempDir(), Now: func() time.Time { return h.now }}, info, s, nil)
	// The spinner's timer is never started: the tests set the clock.
	h.m.ticking = true
	h.send(tea.WindowSizeMsg{Width: width, Height: height})
	return h
}

// send runs one message through Update and the backend calls its
// commands make (timers and prints are left out).
func (h *harness) send(msg tea.Msg) {
	_, cmd := h.m.Update(msg)
	h.run(cmd)
}

func (h *harness) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
	case doneMsg, overlayMsg, approvalsMsg, questionsMsg, reopenedMsg, unqueuedMsg:
		h.send(msg)
	}
}

// ev appends one event to the model's log view.
func (h *harness) ev(typ string, payload any) {
	data, err := json.Marshal(payload)
	if err != nil {
		h.t.Fatal(err)
	}
	e := session.Event{Type: typ, Seq: h.seq, Time: h.now.UnixMilli(), Data: data}
	h.seq++
	_, _ = h.m.Update(eventsMsg{s: h.m.stream, events: []session.Event{e}})
}

func (h *harness) key(k string) {
	var msg tea.KeyPressMsg
	switch k {
	case "enter":
		msg = tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		msg = tea.KeyPressMsg{Code: tea.KeyEscape}
	case "up":
		msg = tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		msg = tea.KeyPressMsg{Code: tea.KeyDown}
	case "tab":
		msg = tea.KeyPressMsg{Code: tea.KeyTab}
	case "ctrl+c", "ctrl+s", "ctrl+d", "ctrl+o", "ctrl+j":
		msg = tea.KeyPressMsg{Code: rune(k[5]), Mod: tea.ModCtrl}
	default:
		msg = tea.KeyPressMsg{Code: []rune(k)[0], Text: k}
	}
	h.send(msg)
}

func (h *harness) typeText(s string) {
	for _, r := range s {
		h.key(string(r))
	}
}

func (h *harness) view() string { return ansi.Strip(h.m.View().Content) }

// live is the live area alone (the alt-screen view adds the transcript).
func (h *harness) live() string { return ansi.Strip(h.m.liveTop() + "\n" + h.m.liveBottom()) }

func (h *harness) transcript() string { return ansi.Strip(strings.Join(h.m.transcript, "\n")) }

func (h *harness) startTurn() {
	h.ev(session.TypeRequestHeader, session.RequestHeader{Header: session.RequestHeaderData{Config: session.CallConfig{Provider: "deepseek", Model: "deepseek-v4-flash", Effort: "high"}}})
	h.ev(session.TypeRequestContext, session.RequestContext{Provider: "deepseek", Model: "deepseek-v4-flash", ContextWindow: 100_000})
	h.ev(session.TypePermissionPreset, permission.PresetSelected{Preset: "read-only"})
	h.ev(session.TypeTurnStart, session.TurnStart{Turn: 1})
	h.ev(session.TypeUserMessage, llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "explain the parser"}}, Source: llm.Source{Kind: "user"}})
	h.ev(session.TypeStepStart, session.StepRef{Turn: 1, Step: 1})
}

func (h *harness) chunk(typ llm.ChunkType, text string) {
	h.ev(session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: 1, Chunk: llm.Chunk{Type: typ, Text: text}})
}

func TestStreamingIsLiveThenPrintedOnce(t *testing.T) {
	h := newHarness(t, 100, 24)
	h.startTurn()
	h.chunk(llm.ChunkReasoningDelta, "first I look at the lexer")
	if v := h.view(); !strings.Contains(v, "∴ thinking · first I look at the lexer") {
		t.Errorf("collapsed reasoning missing:\n%s", v)
	}
	h.chunk(llm.ChunkReasoningDelta, "\nthen the grammar")
	h.key("ctrl+o")
	if v := h.live(); !strings.Contains(v, "∴ first I look at the lexer") || !strings.Contains(v, "  then the grammar") {
		t.Errorf("ctrl+o does not expand the reasoning:\n%s", v)
	}
	h.key("ctrl+o")
	h.chunk(llm.ChunkTextDelta, "The parser is **recursive")
	v := h.view()
	if !strings.Contains(v, "● The parser is **recursive") || !strings.Contains(v, "working") {
		t.Errorf("streaming text missing:\n%s", v)
	}
	if strings.Contains(h.transcript(), "recursive") {
		t.Error("the streaming answer was printed before it finished")
	}
	h.now = h.now.Add(2 * time.Second)
	h.ev(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Usage: &llm.Usage{InputTokens: 20_000, OutputTokens: 500},
		Message: llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockReasoning, Text: "first I look at the lexer\nthen the grammar"}, {Type: llm.BlockText, Text: "The parser is **recursive descent**."}}}})
	h.ev(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.TurnEndReason{Kind: session.EndCompleted}})
	tr := h.transcript()
	for _, want := range []string{"› explain the parser", "∴ Thought for 2.0s · ctrl+o expands", "● The parser is recursive descent."} {
		if strings.Count(tr, want) != 1 {
			t.Errorf("transcript has %q %d times:\n%s", want, strings.Count(tr, want), tr)
		}
	}
	v = h.live()
	if strings.Contains(v, "working") || strings.Contains(v, "recursive") {
		t.Errorf("the live area still shows the finished turn:\n%s", v)
	}
	status := "deepseek/deepseek-v4-flash · effort high · read-only · ctx 20% · ↑20.0k ↓500 · sess-1"
	if !strings.Contains(v, status) {
		t.Errorf("status line: want %q in\n%s", status, v)
	}
	// Narrower, the least useful facts give way first.
	h.send(tea.WindowSizeMsg{Width: 60, Height: 24})
	if v := h.live(); !strings.Contains(v, "deepseek/deepseek-v4-flash · read-only · ctx 20% · sess-1") {
		t.Errorf("narrow status line:\n%s", v)
	}
}

func TestCtrlCCancelsThenExitsWithin2s(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.startTurn()
	h.chunk(llm.ChunkTextDelta, "partial")
	h.key("ctrl+c")
	if h.b.cancels != 1 || h.m.quitting {
		t.Fatalf("first ctrl+c: %d cancels, quitting %v", h.b.cancels, h.m.quitting)
	}
	if !strings.Contains(h.view(), "press ctrl+c again to exit") {
		t.Error("no exit hint")
	}
	h.ev(session.TypeAssistantMsg, session.AssistantMessage{Turn: 1, Step: 1, Interrupted: true,
		Message: llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "partial"}}}})
	h.ev(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.TurnEndReason{Kind: session.EndAborted, Cause: "user"}})
	if tr := h.transcript(); !strings.Contains(tr, "● partial") || !strings.Contains(tr, "⎿ interrupted") {
		t.Errorf("partial answer not kept:\n%s", tr)
	}
	// Too late for a double press: it only arms again.
	h.now = h.now.Add(3 * time.Second)
	h.key("ctrl+c")
	if h.m.quitting {
		t.Fatal("a ctrl+c 3s later exited")
	}
	h.now = h.now.Add(time.Second)
	h.key("ctrl+c")
	if !h.m.quitting || h.m.exitCode != 130 {
		t.Fatalf("second ctrl+c within 2s: quitting %v code %d", h.m.quitting, h.m.exitCode)
	}
}

func TestEscCancelsAndCtrlDExits(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.startTurn()
	h.key("esc")
	if h.b.cancels != 1 {
		t.Errorf("esc: %d cancels", h.b.cancels)
	}
	h.typeText("x")
	h.key("ctrl+d")
	if h.m.quitting {
		t.Fatal("ctrl+d with text exited")
	}
	h.m.composer.Reset()
	h.key("ctrl+d")
	if !h.m.quitting || h.m.exitCode != 0 {
		t.Fatalf("ctrl+d on an empty composer: quitting %v code %d", h.m.quitting, h.m.exitCode)
	}
}

func TestTypingWhileBusyQueuesAndSteers(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.startTurn()
	h.typeText("also check the tests")
	h.key("enter")
	if len(h.b.sent) != 1 || h.b.sent[0] != (sent{"also check the tests", host.DeliveryQueue}) {
		t.Fatalf("a message typed during the turn: %+v", h.b.sent)
	}
	// The host queues it for the next turn and logs that: the queue shown
	// is the log's.
	queued := llm.Message{ID: "m1", Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "also check the tests"}}, Source: llm.Source{Kind: "user"}}
	h.ev(session.TypeInboxSpliced, session.InboxSpliced{Target: session.TargetNextTurn, Inserted: []llm.Message{queued}})
	if v := h.live(); !strings.Contains(v, "⧗ queued: also check the tests · ↑ edits") {
		t.Errorf("queue not shown:\n%s", v)
	}
	h.key("up")
	if len(h.b.queueOps) != 1 || h.b.queueOps[0] != host.QueueRemove+" m1" {
		t.Fatalf("up did not take the message back from the host's queue: %v", h.b.queueOps)
	}
	if got := h.m.composer.Value(); got != "also check the tests" {
		t.Fatalf("the taken-back message is not in the composer: %q", got)
	}
	h.ev(session.TypeInboxSpliced, session.InboxSpliced{Target: session.TargetNextTurn, RemovedCount: 1, Outcome: "removed"})
	if v := h.live(); strings.Contains(v, "queued") {
		t.Errorf("the removed message is still shown:\n%s", v)
	}
	h.m.composer.Reset()
	h.typeText("stop and use the lexer")
	h.key("ctrl+s")
	if len(h.b.sent) != 2 || h.b.sent[1] != (sent{"stop and use the lexer", host.DeliverySteer}) {
		t.Fatalf("steer: %+v", h.b.sent)
	}
}

func TestHistoryAndMultiline(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.typeText("first")
	h.key("enter")
	h.typeText("line one")
	h.key("ctrl+j")
	h.typeText("line two")
	h.key("enter")
	if len(h.b.sent) != 2 || h.b.sent[1].text != "line one\nline two" {
		t.Fatalf("sent %+v", h.b.sent)
	}
	h.key("up")
	h.key("up") // within the two-line entry
	h.key("up")
	if got := h.m.composer.Value(); got != "first" {
		t.Errorf("history: %q", got)
	}
	h.key("down")
	h.key("down")
	if got := h.m.composer.Value(); got != "" {
		t.Errorf("history past the end: %q", got)
	}
}

func approval(session string) host.Approval {
	return host.Approval{ID: "ap-1", SessionID: session, ToolName: "bash", Command: "rm -rf build", Cwd: "/work/project", Reason: "writes outside the sandbox"}
}

func TestApprovalPromptDeniesByDefault(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.send(approvalsMsg{list: []host.Approval{approval("other-session")}})
	if len(h.m.approvals) != 0 {
		t.Fatal("an approval of an unrelated session was taken")
	}
	h.send(approvalsMsg{list: []host.Approval{approval("sess-1")}})
	v := h.view()
	for _, want := range []string{"Allow bash?", "$ rm -rf build", "in /work/project", "why: writes outside the sandbox", "› Deny"} {
		if !strings.Contains(v, want) {
			t.Errorf("prompt lacks %q:\n%s", want, v)
		}
	}
	h.key("x") // not an answer: nothing happens, nothing is typed
	h.key("enter")
	if len(h.b.answers) != 1 || h.b.answers[0].Decision != host.DecisionReject {
		t.Fatalf("enter on the default focus: %+v", h.b.answers)
	}
	if h.m.composer.Value() != "" {
		t.Errorf("keys leaked into the composer: %q", h.m.composer.Value())
	}
	h.send(approvalsMsg{list: []host.Approval{{ID: "ap-2", SessionID: "sess-1", ToolName: "write", Arguments: json.RawMessage(`{"file_path":"/etc/hosts"}`)}}})
	if v := h.view(); !strings.Contains(v, "$ write /etc/hosts") {
		t.Errorf("a file tool's path is not shown:\n%s", v)
	}
	h.key("e")
	h.typeText("use a temp file")
	h.key("enter")
	if len(h.b.answers) != 2 || h.b.answers[1] != (host.Answer{Decision: host.DecisionReject, Feedback: "use a temp file"}) {
		t.Fatalf("deny with feedback: %+v", h.b.answers)
	}
	h.send(approvalsMsg{list: []host.Approval{{ID: "ap-3", SessionID: "sess-1", ToolName: "bash", Command: "make"}}})
	if v := h.view(); !strings.Contains(v, "a allow for the session") {
		t.Errorf("a bash approval does not offer the session grant:\n%s", v)
	}
	h.key("y")
	if len(h.b.answers) != 3 || h.b.answers[2].Decision != host.DecisionAllowOnce {
		t.Fatalf("y: %+v", h.b.answers)
	}
	h.send(approvalsMsg{list: []host.Approval{{ID: "ap-4", SessionID: "sess-1", ToolName: "bash", Command: "make test"}}})
	h.key("a")
	if len(h.b.answers) != 4 || h.b.answers[3].Decision != host.DecisionAllowSession {
		t.Fatalf("a: %+v", h.b.answers)
	}
	h.send(approvalsMsg{list: []host.Approval{{ID: "ap-5", SessionID: "sess-1", ToolName: "write"}}})
	h.key("a") // no session grant for a write: nothing happens
	if len(h.b.answers) != 4 || len(h.m.approvals) != 1 {
		t.Fatalf("a on a write: %+v", h.b.answers)
	}
	// A decision logged by the host is shown with the command.
	h.ev(session.TypeApprovalAsked, permission.ApprovalAsked{ID: "ap-1", ToolName: "bash", Command: "rm -rf build"})
	h.ev(session.TypeApprovalDecided, permission.ApprovalDecided{ID: "ap-1", Outcome: "rejected", By: "user"})
	if tr := h.transcript(); !strings.Contains(tr, "✗ denied rm -rf build · rejected by user") {
		t.Errorf("decision row missing:\n%s", tr)
	}
}

func TestSubagentRowsAndTree(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.startTurn()
	h.ev(session.TypeSubagentStart, subagent.StartEvent{RunID: "r1", ChildID: "child-1", Provider: "deepseek", Label: "greeter", Mode: "continuable", Depth: 1})
	h.now = h.now.Add(3 * time.Second)
	if v := h.view(); !strings.Contains(v, "◆ subagent greeter · deepseek · 3.0s") {
		t.Errorf("no live child row:\n%s", v)
	}
	if !h.m.kin["child-1"] {
		t.Error("the child's approvals would not be shown")
	}
	h.ev(session.TypeSubagentEnd, subagent.EndEvent{RunID: "r1", ChildID: "child-1", StopReason: "completed", Usage: &llm.Usage{InputTokens: 1000, OutputTokens: 200}})
	if tr := h.transcript(); !strings.Contains(tr, "◆ subagent greeter · deepseek · 3.0s · 1.2k tokens · completed") {
		t.Errorf("no finished child row:\n%s", tr)
	}
	h.b.rows = []catalog.Row{{ID: "child-1", Depth: 1, Label: "greeter", Provider: "deepseek", Activity: catalog.ActivityInactive},
		{ID: "grandchild-1", Depth: 2, Label: "helper", Provider: "deepseek", Activity: catalog.ActivityRunning}}
	h.b.events["grandchild-1"] = []session.Event{
		{Type: session.TypeUserMessage, Seq: 0, Data: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"CHILD TASK"}],"source":{"kind":"` + subagent.SourceParent + `","form":"delegation"}}`)},
		{Type: session.TypeAssistantMsg, Seq: 1, Data: json.RawMessage(`{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"child says hi"}]}}`)},
	}
	h.typeText("/tree")
	h.key("enter")
	v := h.view()
	if !strings.Contains(v, "○ greeter") || !strings.Contains(v, "  ● helper") {
		t.Fatalf("tree overlay:\n%s", v)
	}
	h.key("down")
	h.key("enter")
	v = h.view()
	if !strings.Contains(v, "subagent helper (read-only)") || !strings.Contains(v, "child says hi") || !strings.Contains(v, "› CHILD TASK\n  (from the parent)") {
		t.Fatalf("child transcript:\n%s", v)
	}
	h.key("esc")
	if h.m.overlay != nil {
		t.Error("esc did not close the transcript")
	}
}

func TestSlashCommands(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.typeText("/nope")
	h.key("enter")
	if tr := h.transcript(); !strings.Contains(tr, "unknown command /nope") {
		t.Errorf("unknown command not reported:\n%s", tr)
	}
	h.typeText("/help")
	h.key("enter")
	for _, c := range commands {
		if !strings.Contains(h.transcript(), "/"+c.name) {
			t.Errorf("/help lacks /%s", c.name)
		}
	}
	h.typeText("/jobs")
	h.key("enter")
	if tr := h.transcript(); !strings.Contains(tr, "job-1  running") {
		t.Errorf("/jobs:\n%s", tr)
	}
	h.typeText("/compact")
	h.key("enter")
	if tr := h.transcript(); !strings.Contains(tr, "nothing to compact") {
		t.Errorf("/compact:\n%s", tr)
	}
	h.typeText("/he")
	h.key("tab")
	if got := h.m.composer.Value(); got != "/help " {
		t.Errorf("command completion: %q", got)
	}
}

func TestSkillIsInvocable(t *testing.T) {
	h := newHarness(t, 80, 24)
	dir := filepath.Join(h.m.o.Cwd, ".agents", "skills", "release-notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: release-notes\ndescription: write release notes\n---\nList the changes since the last tag.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(h.m.skills()) == 0 {
		t.Skip("skills are not discovered from .agents/skills in this layout")
	}
	h.typeText("/release-notes v2")
	h.key("enter")
	if len(h.b.sent) != 1 || !strings.Contains(h.b.sent[0].text, "List the changes since the last tag.") || !strings.HasPrefix(h.b.sent[0].text, "/release-notes v2") {
		t.Fatalf("skill message: %+v", h.b.sent)
	}
}

func TestPathCompletionAndImages(t *testing.T) {
	h := newHarness(t, 80, 24)
	cwd := h.m.o.Cwd
	for _, f := range []string{"main.go", "make.sh", "shot.png"} {
		if err := os.WriteFile(filepath.Join(cwd, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.typeText("look at @mai")
	h.key("tab")
	if got := h.m.composer.Value(); got != "look at @main.go" {
		t.Errorf("completion: %q", got)
	}
	h.m.composer.Reset()
	h.typeText("@ma")
	h.key("tab")
	if got := h.m.composer.Value(); got != "@ma" || !strings.Contains(h.m.hint, "main.go  make.sh") {
		t.Errorf("ambiguous completion: %q hint %q", got, h.m.hint)
	}
	h.m.composer.Reset()
	h.send(tea.PasteMsg{Content: "'" + filepath.Join(cwd, "shot.png") + "'"})
	if got := h.m.composer.Value(); got != "@"+filepath.Join(cwd, "shot.png")+" " {
		t.Errorf("pasted image path: %q", got)
	}
	_, images := withImages(h.m.composer.Value()+"and @shot.png", cwd)
	if len(images) != 2 || images[0].MediaType != "image/png" {
		t.Errorf("images: %+v", images)
	}
}

// 20 columns.
// TestSwitchingChoicesKeepsTheOthers: /model, /effort and /permission
// reopen the session with one choice changed and the others as they are.
func TestSwitchingChoicesKeepsTheOthers(t *testing.T) {
	h := newHarness(t, 100, 24)
	h.startTurn()
	h.ev(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.TurnEndReason{Kind: session.EndCompleted}})
	h.typeText("/model deepseek/deepseek-v4-pro")
	h.key("enter")
	h.typeText("/permission auto")
	h.key("enter")
	want := []OpenRequest{
		{Cwd: h.m.o.Cwd, Model: "deepseek/deepseek-v4-pro", Effort: "high", Permission: "read-only"},
		{Cwd: h.m.o.Cwd, Model: "deepseek/deepseek-v4-pro", Effort: "high", Permission: "auto"},
	}
	if len(h.b.reopens) != 2 || h.b.reopens[0] != want[0] || h.b.reopens[1] != want[1] {
		t.Fatalf("reopens %+v, want %+v", h.b.reopens, want)
	}
	if v := h.live(); !strings.Contains(v, "deepseek/deepseek-v4-pro · effort high · auto") {
		t.Errorf("status line after the switch:\n%s", v)
	}
	h.ev(session.TypeTurnStart, session.TurnStart{Turn: 2})
	h.typeText("/model x/y")
	h.key("enter")
	if len(h.b.reopens) != 2 || !strings.Contains(h.transcript(), "/model waits for the turn to end") {
		t.Errorf("a switch during a turn was not refused: %+v", h.b.reopens)
	}
}

func TestLongPasteIsKeptWhole(t *testing.T) {
	h := newHarness(t, 80, 24)
	var lines []string
	for i := range 500 {
		lines = append(lines, fmt.Sprintf("pasted line %d", i))
	}
	text := strings.Join(lines, "\n")
	h.send(tea.PasteMsg{Content: text})
	if got := h.m.composer.Value(); got != text {
		t.Fatalf("the paste was cut: %d of %d bytes", len(got), len(text))
	}
	h.key("enter")
	if len(h.b.sent) != 1 || h.b.sent[0].text != text {
		t.Fatalf("sent %d messages", len(h.b.sent))
	}
	for _, l := range strings.Split(h.view(), "\n") {
		if strings.Contains(l, "pasted line") {
			t.Fatalf("the sent paste is still in the composer: %q", l)
		}
	}
}
