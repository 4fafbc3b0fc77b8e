package subagent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

func TestParallelForegroundChildren(t *testing.T) {
	w := newWorld(t, worldOptions{})
	var mu sync.Mutex
	arrived := map[string]bool{} // distinct children, not requests: a retry must not pass the barrier
	both := make(chan struct{})
	w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if sessionOf(r) == "parent" {
			if len(toolResults(r)) == 0 {
				return llmtest.Response{ToolCalls: []llmtest.ToolCall{
					delegate("subagent", "alpha task", "task-alpha"),
					delegate("subagent", "beta task", "task-beta"),
				}}
			}
			return llmtest.Response{Text: "both done"}
		}
		// The barrier: neither child gets an answer until both have asked,
		// which only happens if the two delegations run at the same time.
		mu.Lock()
		if !arrived[sessionOf(r)] {
			arrived[sessionOf(r)] = true
			if len(arrived) == 2 {
				close(both)
			}
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(20 * time.Second):
			return failResponse("the children did not overlap")
		}
		for _, task := range []string{"alpha", "beta"} {
			if hasUserText(r, "task-"+task) {
				return llmtest.Response{Text: "answer " + task, Usage: &llmtest.Usage{Input: 10, Output: 3}}
			}
		}
		return failResponse("unexpected child request")
	})
	out := w.run(t.Context(), "delegate two tasks")
	if out.Reason.Kind != session.EndCompleted || out.Text != "both done" {
		t.Fatalf("parent outcome %+v", out)
	}
	checkBalanced(t, w.parent.Events())

	// Results commit in model order whatever order the children finished.
	res := resultsOf(t, w.parent)
	if len(res) != 2 {
		t.Fatalf("%d tool results", len(res))
	}
	childOf := map[string]string{}
	for i, want := range []string{"answer alpha", "answer beta"} {
		if res[i].IsError || text(res[i].Content) != want {
			t.Fatalf("result %d = %+v, want %q", i, res[i], want)
		}
		var meta struct {
			RunID, ChildID, Provider, StopReason string
			Usage                                *struct{ InputTokens, OutputTokens int64 }
		}
		if err := json.Unmarshal(res[i].Meta, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.RunID == "" || meta.ChildID == "" || meta.Provider != subagent.ProviderSpawn || meta.StopReason != subagent.StopCompleted ||
			meta.Usage == nil || meta.Usage.InputTokens != 10 || meta.Usage.OutputTokens != 3 {
			t.Errorf("result %d meta = %s", i, res[i].Meta)
		}
		childOf[meta.RunID] = meta.ChildID
	}

	starts, ends := checkLifecycle(t, w.parent)
	if len(starts) != 2 {
		t.Fatalf("%d runs logged", len(starts))
	}
	labels := []string{}
	for id, s := range starts {
		labels = append(labels, s.Label)
		if s.Provider != subagent.ProviderSpawn || s.Depth != 1 || childOf[id] != s.ChildID {
			t.Errorf("start %+v", s)
		}
		if e := ends[id]; e.StopReason != subagent.StopCompleted || e.Diagnostic != "" || e.Usage == nil || e.Usage.InputTokens != 10 {
			t.Errorf("end %+v", e)
		}
	}
	slices.Sort(labels)
	if !slices.Equal(labels, []string{"alpha task", "beta task"}) {
		t.Errorf("labels %v", labels)
	}

	for i := range 2 {
		c := w.child(i)
		h := c.log.Header()
		if h.ParentSession != "parent" || h.Origin != "subagent" || h.DelegationDepth != 1 || h.Cwd != w.parent.Header().Cwd ||
			h.AgentPreset != "standard" || h.SeedLength != nil {
			t.Errorf("child header %+v", h)
		}
		if c.closeCount() != 1 {
			t.Errorf("child %s closed %d times", c.id, c.closeCount())
		}
		events := c.log.Events()
		checkBalanced(t, events)
		// The descriptor is the child's identity, recorded before its
		// first prompt.
		desc := -1
		for j, e := range events {
			if e.Type == session.TypeSubagentDescriptor && desc < 0 {
				desc = j
			}
			if e.Type == session.TypeUserMessage && (desc < 0 || j < desc) {
				t.Fatalf("child %s: user message at %d before the descriptor", c.id, j)
			}
		}
		d := eventsOf[subagent.Descriptor](t, events, session.TypeSubagentDescriptor)
		if len(d) != 1 || d[0].Version != 2 || d[0].Mode != subagent.ModeOneShot || d[0].Provider != subagent.ProviderSpawn || !strings.HasSuffix(d[0].Label, " task") {
			t.Errorf("descriptor %+v", d)
		}
		msgs := eventsOf[struct {
			Source struct{ Kind, Form string }
		}](t, events, session.TypeUserMessage)
		if len(msgs) != 1 || msgs[0].Source.Kind != subagent.SourceParent {
			t.Errorf("child prompt messages %+v", msgs)
		}
	}
}

func TestChildRunsBash(t *testing.T) {
	w := newWorld(t, worldOptions{})
	w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		results := toolResults(r)
		switch {
		case sessionOf(r) == "parent" && len(results) == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{delegate("subagent", "write a file", "task-bash")}}
		case sessionOf(r) == "parent":
			return llmtest.Response{Text: "parent saw: " + results[0]}
		case len(results) == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{bashCall("echo from-child > out.txt && cat out.txt")}}
		default:
			return llmtest.Response{Text: "child wrote: " + strings.TrimSpace(strings.Split(results[0], "\n")[0])}
		}
	})
	out := w.run(t.Context(), "go")
	if out.Reason.Kind != session.EndCompleted || out.Text != "parent saw: child wrote: from-child" {
		t.Fatalf("outcome %+v", out)
	}
	// The child works in the parent's directory.
	data, err := os.ReadFile(filepath.Join(w.parent.Header().Cwd, "out.txt"))
	if err != nil || strings.TrimSpace(string(data)) != "from-child" {
		t.Fatalf("out.txt = %q, %v", data, err)
	}
	c := w.child(0)
	checkBalanced(t, c.log.Events())
	res := resultsOf(t, c.log)
	if len(res) != 1 || res[0].Name != "bash" || res[0].IsError || !strings.Contains(text(res[0].Content), "[exit code: 0]") {
		t.Fatalf("child tool results %+v", res)
	}
}

func TestDelegationDepthCap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxDepth *int
		children int // children created
	}{
		{"default cap stops a child at depth 3", nil, 3},
		{"cap 1 lets only the parent delegate", new(1), 1},
		{"cap 0 forbids delegation", new(0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOptions{maxDepth: tc.maxDepth})
			// Each level delegates the next ("level-N" marks the prompts)
			// and reports what its delegation returned.
			w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
				level := 0
				for n := 1; n <= 5; n++ {
					if hasUserText(r, "level-"+string(rune('0'+n))+" task") {
						level = n
					}
				}
				if results := toolResults(r); len(results) > 0 {
					return llmtest.Response{Text: "level " + string(rune('0'+level)) + " got: " + results[0]}
				}
				next := "level-" + string(rune('0'+level+1)) + " task"
				return llmtest.Response{ToolCalls: []llmtest.ToolCall{delegate("subagent", "go deeper", next)}}
			})
			out := w.run(t.Context(), "start")
			if out.Reason.Kind != session.EndCompleted {
				t.Fatalf("outcome %+v", out)
			}
			if n := w.childCount(); n != tc.children {
				t.Fatalf("%d children created, want %d", n, tc.children)
			}
			// The deepest agent's delegation was refused before any child
			// was created, and it could go on with its turn.
			deepest := w.parent
			if tc.children > 0 {
				deepest = w.child(tc.children - 1).log
			}
			if d := deepest.Header().DelegationDepth; d != tc.children {
				t.Errorf("deepest agent at depth %d", d)
			}
			res := resultsOf(t, deepest)
			if len(res) != 1 || !res[0].IsError || res[0].Error == nil || res[0].Error.Code != subagent.CodeDepthExceeded {
				t.Fatalf("deepest agent's delegation result %+v", res)
			}
			if starts, _ := checkLifecycle(t, deepest); len(starts) != 0 {
				t.Errorf("a refused delegation logged a run")
			}
			for i := range tc.children {
				c := w.child(i)
				if c.log.Header().DelegationDepth != i+1 {
					t.Errorf("child %d at depth %d", i, c.log.Header().DelegationDepth)
				}
				checkBalanced(t, c.log.Events())
			}
			checkBalanced(t, w.parent.Events())
		})
	}
}

func TestForkSeedExcludesOpenTurn(t *testing.T) {
	w := newWorld(t, worldOptions{})
	var mu sync.Mutex
	var childReqs []llmtest.Request
	w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if sessionOf(r) != "parent" {
			mu.Lock()
			childReqs = append(childReqs, r)
			mu.Unlock()
			return llmtest.Response{Text: "forked answer"}
		}
		switch {
		case !hasUserText(r, "second question"):
			return llmtest.Response{Text: "first answer"}
		case len(toolResults(r)) == 0:
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{delegate("subagent_fork", "review", "fork-task")}}
		}
		return llmtest.Response{Text: "parent done"}
	})
	// Both prompts are queued up front, so when turn 2 forks, the seed's
	// inbox history still holds "second question" as pending input.
	out := w.run(t.Context(), "first question", "second question")
	if out.Reason.Kind != session.EndCompleted || out.Text != "parent done" {
		t.Fatalf("outcome %+v", out)
	}
	pe := w.parent.Events()
	turnEnds := []int{}
	for i, e := range pe {
		if e.Type == session.TypeTurnEnd {
			turnEnds = append(turnEnds, i)
		}
	}
	seedLen := turnEnds[0] + 1 // through turn 1's turn/end, before turn 2

	spec := w.spec(0)
	if len(spec.Seed) != seedLen || spec.Seed[len(spec.Seed)-1].Type != session.TypeTurnEnd {
		t.Fatalf("seed of %d events, want %d ending in turn/end", len(spec.Seed), seedLen)
	}
	c := w.child(0)
	h := c.log.Header()
	if h.SeedLength == nil || *h.SeedLength != int64(seedLen) || h.ParentSession != "parent" {
		t.Fatalf("child header %+v", h)
	}
	ce := c.log.Events()
	for i := range seedLen {
		if ce[i].Type != pe[i].Type || string(ce[i].Data) != string(pe[i].Data) {
			t.Fatalf("child event %d differs from the parent's", i)
		}
	}
	if ce[seedLen].Type != session.TypeEndSeed {
		t.Errorf("first live child event is %s", ce[seedLen].Type)
	}
	if n := len(eventsOf[struct{}](t, ce, session.TypeEndSeed)); n != 1 {
		t.Errorf("%d session/end-seed events, want 1", n)
	}
	d := eventsOf[subagent.Descriptor](t, ce[seedLen:], session.TypeSubagentDescriptor)
	if len(d) != 1 || d[0].Provider != subagent.ProviderFork || d[0].Label != "review" {
		t.Errorf("descriptor %+v", d)
	}
	checkBalanced(t, ce)

	mu.Lock()
	defer mu.Unlock()
	if len(childReqs) != 1 {
		t.Fatalf("%d child requests", len(childReqs))
	}
	r := childReqs[0]
	// The child sees turn 1 and its own task, never the parent's
	// in-flight turn 2 or the pending prompt the seed carried.
	if !hasUserText(r, "first question") || !hasUserText(r, "fork-task") || hasUserText(r, "second question") {
		t.Errorf("child request user messages %q", userTexts(r))
	}
	sawAnswer := false
	for _, m := range r.Messages() {
		if m["role"] == "assistant" && m["content"] == "first answer" {
			sawAnswer = true
		}
	}
	if !sawAnswer {
		t.Error("child request lacks the parent's first answer")
	}
	if nt, ns := c.agent.Pending(); nt+ns != 0 {
		t.Errorf("child still has pending input: %d, %d", nt, ns)
	}
	starts, ends := checkLifecycle(t, w.parent)
	for id, s := range starts {
		if s.Provider != subagent.ProviderFork || ends[id].StopReason != subagent.StopCompleted {
			t.Errorf("run %+v / %+v", s, ends[id])
		}
	}
}

func TestForkSeed(t *testing.T) {
	ev := func(types ...string) []session.Event {
		out := make([]session.Event, len(types))
		for i, typ := range types {
			out[i] = session.Event{Type: typ, Seq: int64(i)}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		events []session.Event
		want   int
	}{
		{"empty log", nil, 0},
		{"no completed turn", ev(session.TypeInboxSpliced, session.TypeTurnStart, session.TypeStepStart), 0},
		{"one turn", ev(session.TypeTurnStart, session.TypeTurnEnd), 2},
		{"open turn excluded", ev(session.TypeTurnStart, session.TypeTurnEnd, session.TypeInboxSpliced, session.TypeTurnStart, session.TypeStepStart), 2},
		{"through the last turn/end", ev(session.TypeTurnStart, session.TypeTurnEnd, session.TypeTurnStart, session.TypeTurnEnd, session.TypeSubagentStart), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := subagent.ForkSeed(tc.events)
			if got == nil || len(got) != tc.want {
				t.Fatalf("ForkSeed = %v (len %d), want a non-nil prefix of %d", got, len(got), tc.want)
			}
		})
	}
}

func TestParentCancelAbortsChild(t *testing.T) {
	w := newWorld(t, worldOptions{})
	childAsked := make(chan struct{})
	var once sync.Once
	w.srv.SetFallback(func(r llmtest.Request) llmtest.Response {
		if sessionOf(r) == "parent" {
			return llmtest.Response{ToolCalls: []llmtest.ToolCall{delegate("subagent", "slow task", "task-slow")}}
		}
		once.Do(func() { close(childAsked) })
		// Hold the child's stream open until the client goes away.
		return llmtest.Response{StallAfter: llmtest.AtStart}
	})
	if err := w.agent.Queue(agent.NewUserMessage("go")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out agent.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := w.agent.Run(t.Context())
		done <- result{out, err}
	}()
	select {
	case <-childAsked:
	case <-t.Context().Done():
		t.Fatal("the child never called the model")
	}
	if err := w.agent.Cancel("user", false); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.out.Reason.Kind != session.EndAborted || r.out.Reason.Cause != "user" {
		t.Fatalf("parent Run = %+v, %v", r.out, r.err)
	}

	c := w.child(0)
	ends := eventsOf[session.TurnEnd](t, c.log.Events(), session.TypeTurnEnd)
	if len(ends) != 1 || ends[0].Reason.Kind != session.EndAborted || ends[0].Reason.Cause != "parent" {
		t.Fatalf("child turn ends %+v", ends)
	}
	checkBalanced(t, c.log.Events())
	checkBalanced(t, w.parent.Events())
	_, runEnds := checkLifecycle(t, w.parent)
	for _, e := range runEnds {
		if e.StopReason != subagent.StopAborted || !strings.Contains(e.Diagnostic, "cause: parent") {
			t.Errorf("run end %+v", e)
		}
	}
	res := resultsOf(t, w.parent)
	if len(res) != 1 || !res[0].IsError || !strings.Contains(text(res[0].Content), "was cancelled") {
		t.Fatalf("parent tool result %+v", res)
	}
	if c.closeCount() != 1 {
		t.Errorf("child closed %d times", c.closeCount())
	}
}
