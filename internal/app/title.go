package app

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/session"
)

// Session titles.
//
// Every session is titled from its first prompt by the store
// (session.PromptTitle). The "session-title" profile row may name a cheap
// model that proposes a better title: when the first human prompt of a
// new top-level session is logged, one call is made in the background
// and its request and result are logged as session/title, which the
// store then shows as the title. A failed call is logged too, and the
// prompt title stays.

// titleDef is the value of the "session-title" module.
type titleDef struct {
	// Model is "provider/model" of the model that names new sessions;
	// empty names them from the first prompt only.
	Model string `yaml:"model,omitempty"`
	// Timeout bounds the call (default 20s).
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// Title call limits.
const (
	defaultTitleTimeout = 20 * time.Second
	// titleGrace is how long the end of a run waits for a title call
	// still in flight before cancelling it.
	titleGrace = 3 * time.Second
	// titlePromptRunes is how much of the prompt the call sees: the
	// beginning names the task, and the logged request stays small.
	titlePromptRunes = 2000
	titleMaxTokens   = 100
)

// titleSystem is the instruction of the title call.
const titleSystem = `You name coding-agent sessions. Reply with a title for the task in the user's message: at most 8 words, in the language of the message, no quotes, no trailing period, nothing else.`

func registerTitleModule(must func(compose.Module)) {
	must(compose.Module{Name: "session-title", Doc: "a model that titles new sessions (default: the first prompt)", Decode: func(n *yaml.Node) (any, error) {
		v, err := compose.Decode(n, titleDef{})
		if err == nil && v.Timeout < 0 {
			err = fmt.Errorf("timeout must not be negative")
		}
		return v, err
	}})
}

func (d titleDef) apply(e *env) error {
	h := e.log.Header()
	if d.Model == "" || h.ParentSession != "" || named(e.log.View().All()) {
		return nil
	}
	r, err := e.app.Catalog.Resolve(d.Model, UserAgent())
	var missing *provider.MissingCredentialError
	if errors.As(err, &missing) {
		// A title is a nicety: a missing key must not stop the session.
		e.warn("session-title: %v; the session is titled from its first prompt", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	timeout := d.Timeout
	if timeout == 0 {
		timeout = defaultTitleTimeout
	}
	t := &titler{log: e.log, adapter: r.Adapter, provider: r.Provider, model: r.Model.ID, timeout: timeout}
	e.titler = t
	e.log.Observe(t.observe)
	return nil
}

// named reports whether a log already has a human prompt (a resumed
// session keeps the title it got then).
func named(events iter.Seq[session.Event]) bool {
	for e := range events {
		if _, ok := humanPrompt(e); ok || e.Type == session.TypeTitle {
			return true
		}
	}
	return false
}

// humanPrompt returns the text of a person's prompt.
func humanPrompt(e session.Event) (string, bool) {
	if e.Type != session.TypeUserMessage {
		return "", false
	}
	var m llm.Message
	if e.Decode(&m) != nil || m.Source.Kind != "user" || strings.TrimSpace(m.Text()) == "" {
		return "", false
	}
	return m.Text(), true
}

// titler makes a session's one title call.
type titler struct {
	log             *session.Log
	adapter         llm.Adapter
	provider, model string
	timeout         time.Duration
	mu              sync.Mutex
	state           titleState         // guarded by mu
	cancel          context.CancelFunc // guarded by mu; set while running
	done            chan struct{}      // guarded by mu; closed once the call is logged
}

type titleState int

const (
	titleIdle titleState = iota
	titleRunning
	titleStopped
)

// observe starts the call at the first human prompt. It runs on the
// appender's goroutine, so it only starts a goroutine.
func (t *titler) observe(e session.Event) {
	prompt, ok := humanPrompt(e)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != titleIdle {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	t.state, t.cancel, t.done = titleRunning, cancel, make(chan struct{})
	go t.run(ctx, prompt, t.done)
}

// run makes the call and logs it.
func (t *titler) run(ctx context.Context, prompt string, done chan struct{}) {
	defer close(done)
	if utf8.RuneCountInString(prompt) > titlePromptRunes {
		prompt = string([]rune(prompt)[:titlePromptRunes]) + "…"
	}
	req := llm.Request{
		Model:  t.model,
		System: titleSystem,
		Messages: []llm.Message{{ID: "session-title", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(prompt)},
			Source: llm.Source{Kind: "plugin", Plugin: "session-title"}}},
		Effort:    llm.EffortOff,
		MaxTokens: titleMaxTokens,
		Purpose:   "title",
		SessionID: t.log.ID(),
	}
	p := session.Title{Provider: t.provider, Model: t.model, Request: req}
	p.Response, p.Usage, p.Error = callText(ctx, t.adapter, req)
	if p.Error == nil {
		if p.Title = session.CleanTitle(p.Response); p.Title == "" {
			p.Error = &llm.Failure{Code: llm.CodeEmptyResponse, Message: "the title call returned no usable title"}
		}
	}
	// An append can only fail once the session is lost to another
	// process, which then owns its log; the prompt title stands.
	_, _ = t.log.Append(session.TypeTitle, p, session.Ignorable())
}

// settle waits for a call in flight until it ends, grace passes or ctx
// is done, then cancels it and waits for its (failed) record; no call
// starts after.
func (t *titler) settle(ctx context.Context, grace time.Duration) {
	t.mu.Lock()
	state, done, cancel := t.state, t.done, t.cancel
	t.state = titleStopped
	t.mu.Unlock()
	if state != titleRunning {
		return
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	cancel()
	<-done
}

// callText makes one call and returns its text.
func callText(ctx context.Context, ad llm.Adapter, req llm.Request) (string, *llm.Usage, *llm.Failure) {
	var asm llm.Assembler
	for ch, err := range ad.Stream(ctx, req) {
		if err != nil {
			return "", nil, llm.AsFailure(err)
		}
		asm.Add(ch)
	}
	var usage *llm.Usage
	if u, ok := asm.Usage(); ok {
		usage = &u
	}
	if ctx.Err() != nil {
		return "", usage, llm.AsFailure(context.Cause(ctx))
	}
	if f := asm.Finish(); f != nil && (f.Reason == llm.FinishError || f.Reason == llm.FinishAborted) {
		if f.Failure != nil {
			return "", usage, f.Failure
		}
		return "", usage, &llm.Failure{Code: llm.CodeUnknown, Message: "the title call finished with " + string(f.Reason)}
	}
	var b strings.Builder
	for _, bl := range asm.Blocks() {
		if bl.Type == llm.BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String(), usage, nil
}

// SettleTitle waits briefly (a few seconds, or until ctx is done) for a
// session-title call still in flight (see the "session-title" profile
// row) so that its record is in the log before the run reports; a call
// that takes longer is cancelled and logged as failed. It is a no-op
// without a title model, and idempotent.
func (s *Session) SettleTitle(ctx context.Context) {
	if s.titler != nil {
		s.titler.settle(ctx, titleGrace)
	}
}
