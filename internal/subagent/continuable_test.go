package subagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
)

// cworld is a world with an activation manager; the parent ("parent")
// is the top-level session the manager reaches through Deliver.
type cworld struct {
	*world
	m       *subagent.Manager
	notices chan notice
}

type notice struct {
	msg  llm.Message
	wake bool
}

const bgTool = "subagent_bg"

func newCWorld(t *testing.T) *cworld {
	t.Helper()
	w := newWorld(t, worldOptions{})
	cw := &cworld{world: w, notices: make(chan notice, 32)}
	m, err := subagent.NewManager(subagent.ManagerOptions{
		Service: w.svc, Factory: w, Deliver: cw.deliver,
		ResolveLog: func(id string) (*session.Log, error) { return w.resolve(&tool.Call{SessionID: id}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	cw.m = m
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	w.tools = append(w.tools, m.Tool(bgTool, subagent.ProviderSpawn, w.resolve), m.SendMessageTool(), m.InterruptTool())
	w.agent = w.newAgent(w.parent, w.registry(subagent.ToolFilter{}, nil), "deepseek-v4-flash", "")
	return cw
}

// deliver is the composition root's Deliver for the top-level parent.
func (cw *cworld) deliver(parentID string, msg llm.Message, wake bool) error {
	if parentID != "parent" {
		return fmt.Errorf("no live session %q", parentID)
	}
	var err error
	if wake {
		err = cw.agent.Steer(msg)
	} else {
		err = cw.agent.Inject(msg)
	}
	cw.notices <- notice{msg, wake}
	return err
}

// ResumeChild implements subagent.ResumeFactory: the child's log is
// rebuilt from its stored events and a fresh agent is wired over it.
func (w *world) ResumeChild(_ context.Context, id string) (subagent.Child, error) {
	w.mu.Lock()
	old := w.logs[id]
	w.mu.Unlock()
	if old == nil {
		return nil, fmt.Errorf("no stored session %q", id)
	}
	log, err := session.NewLog(old.Header(), old.Events(), nil)
	if err != nil {
		return nil, err
	}
	d, _ := subagent.ReadDescriptor(log)
	var filter subagent.ToolFilter
	if d.ToolFilter != nil {
		filter = *d.ToolFilter
	}
	model := d.AgentModel
	if model == "" {
		model = "deepseek-v4-flash"
	}
	c := &testChild{id: id, log: log, agent: w.newAgent(log, w.registry(filter, nil), model, d.Persona)}
	w.mu.Lock()
	w.logs[id] = log
	w.children = append(w.children, c)
	w.mu.Unlock()
	return c, nil
}

// next returns the next notice delivered to the top-level parent.
func (cw *cworld) next(t *testing.T) notice {
	t.Helper()
	select {
	case n := <-cw.notices:
		return n
	case <-t.Context().Done():
		t.Fatal("no settle notice came")
		return notice{}
	}
}

func (cw *cworld) start(t *testing.T, parent *session.Log, label, prompt string) string {
	t.Helper()
	id, err := cw.m.StartContinuable(t.Context(), subagent.ProviderSpawn, subagent.Request{
		Label: label, Prompt: []llm.Block{llm.TextBlock(prompt)}, Parent: parent,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func lastUser(r llmtest.Request) string {
	u := userTexts(r)
	if len(u) == 0 {
		return ""
	}
	return u[len(u)-1]
}

// requestWith returns the first request of session sid with a user
// message containing marker.
func (cw *cworld) requestWith(sid, marker string) (llmtest.Request, bool) {
	for _, r := range cw.srv.Requests() {
		if sessionOf(r) == sid && hasUserText(r, marker) {
			return r, true
		}
	}
	return llmtest.Request{}, false
}

func checkContinuableLifecycle(t *testing.T, log *session.Log, wantPairs int) []subagent.EndEvent {
	t.Helper()
	starts := eventsOf[subagent.StartEvent](t, log.Events(), session.TypeSubagentStart)
	ends := eventsOf[subagent.EndEvent](t, log.Events(), session.TypeSubagentEnd)
	if len(starts) != wantPairs || len(ends) != wantPairs {
		t.Fatalf("%d starts and %d ends, want %d pairs", len(starts), len(ends), wantPairs)
	}
	for i, s := range starts {
		if s.Mode != subagent.ModeContinuable || s.RunID != ends[i].RunID || s.ChildID != ends[i].ChildID {
			t.Fatalf("pair %d: start %+v, end %+v", i, s, ends[i])
		}
	}
	return ends
}

func TestContinuableNoticeWakesParent(t *testing.T) {
	cw := newCWorld(t)
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if sessionOf(r) != "parent" {
			return llmtest.Response{Text: "answer A"}
		}
		switch {
		case hasUserText(r, "settled"):
			return llmtest.Response{Text: "PARENT-SAW-NOTICE"}
		case len(toolResults(r)) == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{delegate(bgTool, "task a", "TASK-A")}}
		}
		return llmtest.Response{Text: "waiting"}
	})
	cw.run(t.Context(), "go")
	n := cw.next(t)
	body := text(n.msg.Content)
	if !n.wake || n.msg.Source.Kind != subagent.SourceSubagent || n.msg.Source.Form != subagent.FormSettleNotice {
		t.Fatalf("notice %+v wake=%v", n.msg.Source, n.wake)
	}
	for _, want := range []string{"child-1", "task a", "completed", "answer A"} {
		if !strings.Contains(body, want) {
			t.Fatalf("notice %q lacks %q", body, want)
		}
	}
	if res := resultsOf(t, cw.parent); len(res) != 1 || !strings.Contains(text(res[0].Content), "Started agent child-1 (task a)") {
		t.Fatalf("tool results %+v", res)
	}
	if _, err := cw.agent.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := cw.requestWith("parent", "answer A"); !ok {
		t.Fatal("the parent never saw the notice")
	}
	if err := cw.m.Drain(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	checkContinuableLifecycle(t, cw.parent, 1)
	// The descriptor comes before the prompt in the child's log.
	events := cw.child(0).log.Events()
	desc, prompt := -1, -1
	for i, e := range events {
		if e.Type == session.TypeSubagentDescriptor && desc < 0 {
			desc = i
		}
		if e.Type == session.TypeInboxSpliced && prompt < 0 {
			prompt = i
		}
	}
	d, ok := subagent.ReadDescriptor(cw.child(0).log)
	if !ok || desc < 0 || desc > prompt || d.Mode != subagent.ModeContinuable || d.Label != "task a" || d.Provider != subagent.ProviderSpawn || d.Version != 2 {
		t.Fatalf("descriptor %+v at %d, prompt at %d", d, desc, prompt)
	}
	checkBalanced(t, cw.parent.Events())
}

// TestSendRunningIdleCold continues one child three ways.
func TestSendRunningIdleCold(t *testing.T) {
	cw := newCWorld(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		last := lastUser(r)
		switch {
		case strings.Contains(last, "STEER-1"):
			return llmtest.Response{Text: "got steer"}
		case strings.Contains(last, "BLOCK"):
			once.Do(func() { close(arrived) })
			<-release
			return llmtest.Response{Text: "first"}
		}
		return llmtest.Response{Text: "reply " + last[strings.LastIndex(last, "\n")+1:]}
	})
	id := cw.start(t, cw.parent, "worker", "BLOCK")
	<-arrived
	if st, _ := cw.m.State(id); st != subagent.StateRunning {
		t.Fatalf("state %q, want running", st)
	}
	if err := cw.m.Send(t.Context(), "parent", id, "STEER-1"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if body := text(cw.next(t).msg.Content); !strings.Contains(body, "got steer") {
		t.Fatalf("first notice %q", body)
	}
	if err := cw.m.Drain(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	if len(cw.notices) != 0 {
		t.Fatal("a steered activation gave more than one notice")
	}

	// Idle: a new turn and a second notice.
	if err := cw.m.Send(t.Context(), "parent", id, "MORE"); err != nil {
		t.Fatal(err)
	}
	if body := text(cw.next(t).msg.Content); !strings.Contains(body, "reply MORE") {
		t.Fatalf("second notice %q", body)
	}

	// Cold: released, then resumed from its log.
	if err := cw.m.Drain(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	if err := cw.m.Release(id); err != nil {
		t.Fatal(err)
	}
	if st, _ := cw.m.State(id); st != subagent.StateInactive {
		t.Fatalf("state %q, want inactive", st)
	}
	if err := cw.m.Send(t.Context(), "parent", id, "COLD"); err != nil {
		t.Fatal(err)
	}
	if body := text(cw.next(t).msg.Content); !strings.Contains(body, "reply COLD") {
		t.Fatalf("third notice %q", body)
	}
	r, ok := cw.requestWith(id, "COLD")
	if !ok || !hasUserText(r, "BLOCK") || !hasUserText(r, "STEER-1") || !hasUserText(r, "MORE") {
		t.Fatalf("the resumed request lacks the old history: %v", userTexts(r))
	}
	if !strings.Contains(lastUser(r), "Agent parent sent a message:") {
		t.Fatalf("message not framed: %q", lastUser(r))
	}
	// The notice is delivered just before subagent/end is logged, both
	// under the manager's lock; draining waits for that lock.
	if err := cw.m.Drain(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	checkContinuableLifecycle(t, cw.parent, 3)
	checkBalanced(t, cw.child(1).log.Events())
}

func TestSendAuthority(t *testing.T) {
	cw := newCWorld(t)
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response { return llmtest.Response{Text: "ok"} })
	c1 := cw.start(t, cw.parent, "one", "first")
	c2 := cw.start(t, cw.parent, "two", "second")
	c1log, err := cw.resolve(&tool.Call{SessionID: c1})
	if err != nil {
		t.Fatal(err)
	}
	grand := cw.start(t, c1log, "grand", "third")
	if err := cw.m.Drain(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sender, target string
	}{
		{"sibling", c1, c2},
		{"self", c1, c1},
		{"grandchild", "parent", grand},
		{"settled child to parent", c1, "parent"},
		{"grandchild to grandparent", grand, "parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := cw.m.Send(t.Context(), tc.sender, tc.target, "hello")
			if !isCode(err, subagent.CodeUnauthorized) {
				t.Fatalf("err %v, want UNAUTHORIZED", err)
			}
		})
	}
	// The tool reports the code to the model.
	def := cw.m.SendMessageTool()
	args, _ := json.Marshal(map[string]string{"agent_id": c2, "message": "hi"})
	_, err = def.Execute(t.Context(), &tool.Call{SessionID: c1, Arguments: args})
	var te *tool.Error
	if !errors.As(err, &te) || te.Code != subagent.CodeUnauthorized {
		t.Fatalf("tool error %v", err)
	}
	if err := cw.m.Interrupt(t.Context(), c1, c1); !isCode(err, subagent.CodeUnauthorized) {
		t.Fatalf("self interrupt: %v", err)
	}
	if err := cw.m.Interrupt(t.Context(), "parent", grand); err != nil {
		t.Fatalf("interrupting a settled grandchild is a no-op, got %v", err)
	}
	if err := cw.m.Interrupt(t.Context(), "parent", "nobody"); err != nil {
		t.Fatalf("interrupting an unknown agent is a no-op, got %v", err)
	}
}

func TestInterruptKeepsQueuedInput(t *testing.T) {
	cw := newCWorld(t)
	arrived := make(chan struct{})
	var once sync.Once
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if hasUserText(r, "AGAIN") {
			return llmtest.Response{Text: "resumed"}
		}
		once.Do(func() { close(arrived) })
		return llmtest.Response{Text: "never finished", StallAfter: 1}
	})
	id := cw.start(t, cw.parent, "staller", "STALL")
	<-arrived
	if err := cw.m.Send(t.Context(), "parent", id, "QUEUED"); err != nil {
		t.Fatal(err)
	}
	def := cw.m.InterruptTool()
	args, _ := json.Marshal(map[string]string{"agent_id": id})
	if _, err := def.Execute(t.Context(), &tool.Call{SessionID: "parent", Arguments: args}); err != nil {
		t.Fatal(err)
	}
	if body := text(cw.next(t).msg.Content); !strings.Contains(body, "aborted") {
		t.Fatalf("notice %q", body)
	}
	if _, ns := cw.child(0).agent.Pending(); ns != 1 {
		t.Fatalf("%d pending next-step messages, want the queued one kept", ns)
	}
	if err := cw.m.Send(t.Context(), "parent", id, "AGAIN"); err != nil {
		t.Fatal(err)
	}
	if body := text(cw.next(t).msg.Content); !strings.Contains(body, "resumed") {
		t.Fatalf("notice %q", body)
	}
	if r, ok := cw.requestWith(id, "AGAIN"); !ok || !hasUserText(r, "QUEUED") {
		t.Fatal("the queued message was lost")
	}
	if err := cw.m.Drain(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	checkContinuableLifecycle(t, cw.parent, 2)
}

func TestNoClosingMessage(t *testing.T) {
	cw := newCWorld(t)
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response { return llmtest.Response{Empty: true} })
	cw.start(t, cw.parent, "quiet", "say nothing")
	if body := text(cw.next(t).msg.Content); !strings.HasSuffix(body, subagent.NoClosingMessage) {
		t.Fatalf("notice %q", body)
	}
}

// TestParentDrainsDescendants: a child that delegates settles only after
// its grandchild has, and its notice reflects the grandchild's.
func TestParentDrainsDescendants(t *testing.T) {
	cw := newCWorld(t)
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		switch {
		case hasUserText(r, "GRAND"):
			return llmtest.Response{Text: "grand answer"}
		case hasUserText(r, "grand answer"):
			return llmtest.Response{Text: "child saw grand"}
		case len(toolResults(r)) == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{delegate(bgTool, "grand", "GRAND")}}
		}
		return llmtest.Response{Text: "child waiting"}
	})
	id := cw.start(t, cw.parent, "delegator", "DELEGATE")
	if err := cw.m.Drain(t.Context(), "parent"); err != nil {
		t.Fatal(err)
	}
	n := cw.next(t)
	if body := text(n.msg.Content); !strings.Contains(body, "child saw grand") || !strings.Contains(body, id) {
		t.Fatalf("notice %q", body)
	}
	if len(cw.notices) != 0 {
		t.Fatal("the grandchild's notice reached the top-level parent")
	}
	for _, c := range []string{id, "child-2"} {
		if st, _ := cw.m.State(c); st != subagent.StateSettled {
			t.Fatalf("%s is %q", c, st)
		}
	}
	checkContinuableLifecycle(t, cw.parent, 1)
	checkContinuableLifecycle(t, cw.child(0).log, 1)
	checkBalanced(t, cw.child(0).log.Events())
}

func TestCloseDeliversWithoutWake(t *testing.T) {
	cw := newCWorld(t)
	arrived := make(chan struct{})
	var once sync.Once
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		once.Do(func() { close(arrived) })
		return llmtest.Response{StallAfter: 1}
	})
	id := cw.start(t, cw.parent, "staller", "STALL")
	<-arrived
	if err := cw.m.Close(); err != nil {
		t.Fatal(err)
	}
	n := cw.next(t)
	if n.wake || !strings.Contains(text(n.msg.Content), "aborted") {
		t.Fatalf("notice %q wake=%v", text(n.msg.Content), n.wake)
	}
	if err := cw.m.Send(t.Context(), "parent", id, "late"); !isCode(err, subagent.CodeNotDelivered) {
		t.Fatalf("send after close: %v", err)
	}
	if cw.child(0).closeCount() != 1 {
		t.Fatal("the child was not released")
	}
}

// TestChildMessagesParent: a resident child may send_message its direct
// parent; the message wakes the parent like a notice does.
func TestChildMessagesParent(t *testing.T) {
	cw := newCWorld(t)
	cw.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if len(toolResults(r)) == 0 {
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{call(subagent.ToolSendMessage, map[string]string{"agent_id": "parent", "message": "HELLO-UP"})}}
		}
		return llmtest.Response{Text: "sent it"}
	})
	id := cw.start(t, cw.parent, "talker", "talk to your parent")
	first := cw.next(t)
	if !first.wake || first.msg.Source.Kind != subagent.SourceAgent || !strings.Contains(text(first.msg.Content), "Agent "+id+" sent a message:\n\nHELLO-UP") {
		t.Fatalf("message %+v %q", first.msg.Source, text(first.msg.Content))
	}
	if body := text(cw.next(t).msg.Content); !strings.Contains(body, "sent it") {
		t.Fatalf("notice %q", body)
	}
	if res := resultsOf(t, cw.child(0).log); len(res) != 1 || res[0].IsError {
		t.Fatalf("send_message result %+v", res)
	}
}
