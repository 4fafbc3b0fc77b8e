package app

import (
	"context"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// fakeAdapter answers every call with fn.
type fakeAdapter struct {
	calls atomic.Int32
	reqs  chan llm.Request
	fn    func(ctx context.Context) ([]llm.Chunk, error)
}

func (f *fakeAdapter) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	f.calls.Add(1)
	if f.reqs != nil {
		f.reqs <- req
	}
	return func(yield func(llm.Chunk, error) bool) {
		chunks, err := f.fn(ctx)
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
		if err != nil {
			yield(llm.Chunk{}, err)
		}
	}
}

func textAnswer(text string) func(context.Context) ([]llm.Chunk, error) {
	return func(context.Context) ([]llm.Chunk, error) {
		return []llm.Chunk{
			{Type: llm.ChunkBlockStart, BlockType: llm.BlockText},
			{Type: llm.ChunkTextDelta, Text: text},
			{Type: llm.ChunkUsage, Usage: &llm.Usage{InputTokens: 40, OutputTokens: 6}},
			{Type: llm.ChunkFinish, Finish: &llm.Finish{Reason: llm.FinishStop}},
		}, nil
	}
}

func newTitler(t *testing.T, ad llm.Adapter) (*titler, *session.Log) {
	t.Helper()
	log, err := session.NewLog(session.Header{ID: "s"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tt := &titler{log: log, adapter: ad, provider: "cheap", model: "mini", timeout: time.Minute}
	log.Observe(tt.observe)
	return tt, log
}

func appendMsg(t *testing.T, log *session.Log, src llm.Source, text string) {
	t.Helper()
	m := llm.Message{ID: "m", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}, Source: src}
	if _, err := log.Append(session.TypeUserMessage, m); err != nil {
		t.Fatal(err)
	}
}

func titleEvents(t *testing.T, log *session.Log) []session.Title {
	t.Helper()
	var out []session.Title
	for _, e := range log.Events() {
		if e.Type != session.TypeTitle {
			continue
		}
		if !e.Ignorable {
			t.Error("session/title is not marked ignorable")
		}
		var p session.Title
		if err := e.Decode(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestTitlerLogsRequestAndTitle: the first human prompt starts one call;
// its request and result are logged, and the store would show its title.
func TestTitlerLogsRequestAndTitle(t *testing.T) {
	ad := &fakeAdapter{fn: textAnswer("\"Fix the flag parser\".\n")}
	tt, log := newTitler(t, ad)
	appendMsg(t, log, llm.Source{Kind: "plugin", Plugin: "instructions"}, "AGENTS.md says hi")
	long := "the flag parser drops values after --; find out why and fix it\n" + strings.Repeat("details ", 1000)
	appendMsg(t, log, llm.Source{Kind: "user"}, long)
	appendMsg(t, log, llm.Source{Kind: "user"}, "a second prompt")
	tt.settle(context.Background(), time.Minute)
	tt.settle(context.Background(), time.Minute) // idempotent
	got := titleEvents(t, log)
	if len(got) != 1 || ad.calls.Load() != 1 {
		t.Fatalf("%d title events, %d calls", len(got), ad.calls.Load())
	}
	p := got[0]
	if p.Title != "Fix the flag parser" || p.Error != nil || p.Provider != "cheap" || p.Model != "mini" {
		t.Errorf("title event %+v", p)
	}
	if p.Response != "\"Fix the flag parser\".\n" || p.Usage == nil || p.Usage.OutputTokens != 6 {
		t.Errorf("response %q usage %+v", p.Response, p.Usage)
	}
	req := p.Request
	if req.Model != "mini" || req.System != titleSystem || req.Effort != llm.EffortOff || len(req.Messages) != 1 {
		t.Fatalf("request %+v", req)
	}
	// The call sees the beginning of the prompt, not all of it.
	sent := req.Messages[0].Text()
	if !strings.HasPrefix(sent, "the flag parser drops values") || len([]rune(sent)) != titlePromptRunes+1 {
		t.Errorf("sent %d runes: %.60q", len([]rune(sent)), sent)
	}
	for _, e := range log.Events() {
		if e.Type == session.TypeTitle {
			if title, fromModel := session.TitleOf(e); title != "Fix the flag parser" || !fromModel {
				t.Errorf("TitleOf = %q %v", title, fromModel)
			}
		}
	}
}

// TestTitlerLogsFailure: a failed call is logged with its failure and no
// title, so the prompt title stays.
func TestTitlerLogsFailure(t *testing.T) {
	for name, fn := range map[string]func(context.Context) ([]llm.Chunk, error){
		"error": func(context.Context) ([]llm.Chunk, error) {
			return nil, &llm.Failure{Code: llm.CodeAuth, Message: "bad key", Status: 401}
		},
		"no text": textAnswer("  \n"),
	} {
		t.Run(name, func(t *testing.T) {
			tt, log := newTitler(t, &fakeAdapter{fn: fn})
			appendMsg(t, log, llm.Source{Kind: "user"}, "do the thing")
			tt.settle(context.Background(), time.Minute)
			got := titleEvents(t, log)
			if len(got) != 1 || got[0].Title != "" || got[0].Error == nil {
				t.Fatalf("title events %+v", got)
			}
			if title, fromModel := session.TitleOf(log.Events()[len(log.Events())-1]); title != "" || fromModel {
				t.Errorf("a failed call names the session %q", title)
			}
		})
	}
}

// TestTitlerSettleCancelsSlowCall: a call still running when the run
// ends gets the grace, then is cancelled and logged as failed; no call
// starts after settle.
func TestTitlerSettleCancelsSlowCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := &fakeAdapter{reqs: make(chan llm.Request, 1), fn: func(ctx context.Context) ([]llm.Chunk, error) {
			<-ctx.Done()
			return nil, &llm.Failure{Code: llm.CodeAborted, Message: context.Cause(ctx).Error()}
		}}
		tt, log := newTitler(t, ad)
		appendMsg(t, log, llm.Source{Kind: "user"}, "slow model")
		<-ad.reqs
		start := time.Now()
		tt.settle(context.Background(), titleGrace)
		if waited := time.Since(start); waited != titleGrace {
			t.Errorf("settle waited %v, want the grace %v", waited, titleGrace)
		}
		got := titleEvents(t, log)
		if len(got) != 1 || got[0].Error == nil || got[0].Error.Code != llm.CodeAborted {
			t.Fatalf("title events %+v", got)
		}
		// A prompt after settle starts nothing.
		appendMsg(t, log, llm.Source{Kind: "user"}, "after the end")
		synctest.Wait()
		if ad.calls.Load() != 1 {
			t.Errorf("%d calls", ad.calls.Load())
		}
	})
}

// TestTitlerSettleWithoutPrompt: settle before any prompt starts nothing
// and returns at once.
func TestTitlerSettleWithoutPrompt(t *testing.T) {
	ad := &fakeAdapter{fn: textAnswer("x")}
	tt, log := newTitler(t, ad)
	tt.settle(context.Background(), time.Hour)
	appendMsg(t, log, llm.Source{Kind: "user"}, "late prompt")
	if ad.calls.Load() != 0 || len(titleEvents(t, log)) != 0 {
		t.Fatal("a call started after settle")
	}
}

func TestNamedSkipsResumedSessions(t *testing.T) {
	log, _ := session.NewLog(session.Header{ID: "s"}, nil, nil)
	if named(log.View().All()) {
		t.Fatal("an empty log is named")
	}
	appendMsg(t, log, llm.Source{Kind: "plugin"}, "context")
	if named(log.View().All()) {
		t.Fatal("context names a session")
	}
	appendMsg(t, log, llm.Source{Kind: "user"}, "prompt")
	if !named(log.View().All()) {
		t.Fatal("a prompted session is not named")
	}
}

// TestTitlerSettleStopsWithContext: a done context cuts the grace short.
func TestTitlerSettleStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ad := &fakeAdapter{reqs: make(chan llm.Request, 1), fn: func(ctx context.Context) ([]llm.Chunk, error) {
			<-ctx.Done()
			return nil, &llm.Failure{Code: llm.CodeAborted, Message: "cancelled"}
		}}
		tt, log := newTitler(t, ad)
		appendMsg(t, log, llm.Source{Kind: "user"}, "slow model")
		<-ad.reqs
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		tt.settle(ctx, time.Hour)
		if waited := time.Since(start); waited != 0 {
			t.Errorf("settle waited %v after its context was done", waited)
		}
		if got := titleEvents(t, log); len(got) != 1 || got[0].Error == nil {
			t.Fatalf("title events %+v", got)
		}
	})
}
