package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/schema"
	"github.com/dsh-dev/dsh/internal/session"
)

// DefaultMaxDepth is the delegation cap when none is configured: a
// top-level session's children are at depth 1, so three levels of
// delegation are allowed.
const DefaultMaxDepth = 3

// MaxDiagnostic bounds Result.Diagnostic in bytes: it is failure text
// for the parent model and the log, never a transcript.
const MaxDiagnostic = 4096

// Stop reasons of a run.
const (
	StopCompleted = "completed"
	StopAborted   = "aborted"
	StopError     = "error"
	StopMaxTokens = "max-tokens"
	StopRefusal   = "refusal"
)

// Error codes of start rejections.
const (
	CodeUnknownProvider       = "UNKNOWN_PROVIDER"
	CodeUnsupportedCapability = "UNSUPPORTED_CAPABILITY"
	CodeDepthExceeded         = "DEPTH_EXCEEDED"
	CodeInvalidRequest        = "INVALID_REQUEST"
)

// Error is a start rejection with a stable code; Message is fit for the
// calling model.
type Error struct {
	// Code is one of the Code* constants.
	Code string
	// Message explains the rejection to the calling model.
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Capabilities are what a provider can honour. A request needing one the
// provider lacks is rejected before start rather than silently degraded.
type Capabilities struct {
	// OutputSchema: the provider can force a structured result.
	OutputSchema bool
	// MaxDepth: the provider records the child's delegation depth so the
	// cap also binds the child's own delegations.
	MaxDepth bool
	// ToolFilter: the provider can restrict the child's tools.
	ToolFilter bool
	// Persona: the provider can replace the child's persona.
	Persona bool
	// InheritsContext: the child's history is seeded with the parent's
	// completed turns (a fork). It is a description, not a requirement:
	// delegation tools word their prompt guidance by it.
	InheritsContext bool
}

// ToolFilter restricts the global tools a child inherits. A nil Allow
// keeps every tool; a non-nil Allow keeps only the named ones. Deny then
// removes names. It is not an authority ceiling: tools the provider adds
// for the child's own use (structured_output) are never filtered.
type ToolFilter struct {
	// Allow, when non-nil, lists the only tools kept.
	Allow []string `json:"allow,omitempty"`
	// Deny lists tools removed.
	Deny []string `json:"deny,omitempty"`
}

// IsZero reports whether the filter keeps everything.
func (f ToolFilter) IsZero() bool { return f.Allow == nil && len(f.Deny) == 0 }

// Permits reports whether the filter keeps tool name.
func (f ToolFilter) Permits(name string) bool {
	if f.Allow != nil && !slices.Contains(f.Allow, name) {
		return false
	}
	return !slices.Contains(f.Deny, name)
}

// Request asks a provider to start a child.
type Request struct {
	// Label is display metadata (the delegation description).
	Label string
	// Prompt is the task, the child's first user message.
	Prompt []llm.Block
	// Parent is the delegating session's live log. Required.
	Parent *session.Log
	// Provider, Model and Effort select the child's route; "" is the
	// parent's.
	Provider, Model, Effort string
	// OutputSchema, when set, is an object-rooted JSON Schema the child
	// must satisfy through structured_output (capability OutputSchema).
	OutputSchema json.RawMessage
	// MaxDepth lowers the service's delegation cap for this request
	// (capability MaxDepth); it cannot raise it.
	MaxDepth *int
	// Tools restricts the child's tools (capability ToolFilter).
	Tools ToolFilter
	// Persona replaces the child's persona (capability Persona).
	Persona string
	// Progress, when set, receives one-line activity reports while the
	// run goes (completed commands, file changes, commentary), e.g. for a
	// background job's output. Providers call it from their own
	// goroutines, never after the run's result is published; it must be
	// safe for concurrent use and must not block.
	Progress func(line string)

	// RunID, Depth and Permission are set by Service.Start and replace
	// whatever the caller put there, so that a caller cannot lower a
	// child's depth or widen its permissions.
	RunID string
	// Depth is the child's delegation depth (parent's + 1).
	Depth int
	// Permission is the parent's permission state when the run started.
	Permission permission.State
}

// Result is the outcome of a run.
type Result struct {
	// Output is the text blocks of the child's last assistant message
	// with non-empty text, else its accumulated streamed text, else
	// empty.
	Output []llm.Block
	// Structured is the value the child reported through
	// structured_output, when the request had an OutputSchema and the
	// child satisfied it.
	Structured json.RawMessage
	// Diagnostic is bounded failure text (at most MaxDiagnostic bytes).
	Diagnostic string
	// StopReason is one of the Stop* constants.
	StopReason string
	// ChildID is the child session's id.
	ChildID string
	// Usage is the child's token usage over the whole run.
	Usage llm.Usage
}

// Text concatenates the output's text blocks.
func (r Result) Text() string {
	var b strings.Builder
	for _, bl := range r.Output {
		if bl.Type == llm.BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// Run is a started child run as a provider returns it.
type Run interface {
	// ChildID is the child session's id.
	ChildID() string
	// Wait blocks until the run ends or ctx does. The error is an
	// infrastructure failure (a log that could not be written), not a
	// child that failed: that is Result.StopReason.
	Wait(ctx context.Context) (Result, error)
	// Dispose cancels the run if it is still going (cause "disposed"),
	// waits for it to end and releases the child. It is idempotent and,
	// once it has returned, Wait returns at once.
	Dispose() error
}

// Provider starts children of one kind.
type Provider interface {
	Name() string
	Capabilities() Capabilities
	// Start starts a run for a request the service has admitted. ctx
	// bounds the whole run: when it ends, the child is cancelled (cause
	// "parent"). A failed Start must release whatever it created.
	Start(ctx context.Context, req Request) (Run, error)
}

// Options configure a Service.
type Options struct {
	// MaxDepth is the delegation cap: the deepest delegation depth a
	// child may have. Nil means DefaultMaxDepth; 0 forbids delegation.
	MaxDepth *int
	// PermissionDefaults resolves the parent's permission state when no
	// event set it (the deployment default preset).
	PermissionDefaults permission.Defaults
}

// Service is the registry of providers and the gate every delegation
// goes through. It is safe for concurrent use.
type Service struct {
	maxDepth int
	perm     permission.Defaults

	mu        sync.RWMutex
	providers map[string]Provider // guarded by mu
}

// NewService returns an empty service.
func NewService(o Options) (*Service, error) {
	limit := DefaultMaxDepth
	if o.MaxDepth != nil {
		if *o.MaxDepth < 0 {
			return nil, fmt.Errorf("subagent: MaxDepth %d is negative", *o.MaxDepth)
		}
		limit = *o.MaxDepth
	}
	return &Service{maxDepth: limit, perm: o.PermissionDefaults, providers: map[string]Provider{}}, nil
}

// MaxDepth returns the service's delegation cap.
func (s *Service) MaxDepth() int { return s.maxDepth }

// Register adds p under p.Name(); names are unique.
func (s *Service) Register(p Provider) error {
	name := p.Name()
	if name == "" {
		return errors.New("subagent: provider name is empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.providers[name]; dup {
		return fmt.Errorf("subagent: provider %q is already registered", name)
	}
	s.providers[name] = p
	return nil
}

// Unregister removes a provider and reports whether it was there. Runs
// it already started are not affected.
func (s *Service) Unregister(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.providers[name]
	delete(s.providers, name)
	return ok
}

// Provider returns the provider registered under name.
func (s *Service) Provider(name string) (Provider, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.providers[name]
	return p, ok
}

// Providers returns the registered provider names, sorted.
func (s *Service) Providers() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.providers))
	for n := range s.providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Start admits req, starts it on the named provider and logs
// subagent/start to the parent. Rejections are *Error values and happen
// before the provider is asked, so a rejected request creates nothing and
// logs nothing. ctx bounds the run (see Provider.Start); Wait and Dispose
// on the returned handle collect and release it.
func (s *Service) Start(ctx context.Context, provider string, req Request) (*Handle, error) {
	p, ok := s.Provider(provider)
	if !ok {
		return nil, errorf(CodeUnknownProvider, "unknown subagent provider %q (registered: %s)", provider, orNone(s.Providers()))
	}
	if err := s.admit(p, &req); err != nil {
		return nil, err
	}
	req.RunID = newID()
	run, err := p.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	h := &Handle{
		runID: req.RunID, childID: run.ChildID(), provider: p.Name(), mode: ModeOneShot,
		parent: req.Parent, run: run, done: make(chan struct{}),
	}
	// The end event is appended by observe, started only after this
	// append, so the pair is always in order however fast the child is.
	if _, err := req.Parent.Append(session.TypeSubagentStart, StartEvent{
		RunID: h.runID, ChildID: h.childID, Provider: h.provider, Label: req.Label, Mode: h.mode, Depth: req.Depth,
	}); err != nil {
		return nil, errors.Join(err, run.Dispose())
	}
	go h.observe()
	return h, nil
}

// admit checks req against p and fills in the service-owned fields.
func (s *Service) admit(p Provider, req *Request) error {
	if req.Parent == nil {
		return errorf(CodeInvalidRequest, "a subagent request needs the parent session")
	}
	if !hasContent(req.Prompt) {
		return errorf(CodeInvalidRequest, "the subagent prompt is empty")
	}
	caps := p.Capabilities()
	for _, need := range []struct {
		asked, have bool
		what        string
	}{
		{len(req.OutputSchema) > 0, caps.OutputSchema, "outputSchema"},
		{req.MaxDepth != nil, caps.MaxDepth, "maxDepth"},
		{!req.Tools.IsZero(), caps.ToolFilter, "toolFilter"},
		{req.Persona != "", caps.Persona, "persona"},
	} {
		if need.asked && !need.have {
			return errorf(CodeUnsupportedCapability, "subagent provider %q does not support %s", p.Name(), need.what)
		}
	}
	if len(req.OutputSchema) > 0 {
		if err := checkOutputSchema(req.OutputSchema); err != nil {
			return errorf(CodeInvalidRequest, "outputSchema: %v", err)
		}
	}
	limit := s.maxDepth
	if req.MaxDepth != nil {
		if *req.MaxDepth < 0 {
			return errorf(CodeInvalidRequest, "maxDepth %d is negative", *req.MaxDepth)
		}
		limit = min(limit, *req.MaxDepth)
	}
	depth := max(req.Parent.Header().DelegationDepth, 0) + 1
	if depth > limit {
		if limit == 0 {
			return errorf(CodeDepthExceeded, "delegation is disabled (maximum depth 0)")
		}
		return errorf(CodeDepthExceeded, "a subagent here would be at delegation depth %d, above the maximum of %d; do the work yourself", depth, limit)
	}
	req.Depth = depth
	// Captured now, synchronously: a later change of the parent's
	// permissions must not change what the child was delegated.
	req.Permission = s.perm.Current(req.Parent)
	return nil
}

func checkOutputSchema(raw json.RawMessage) error {
	sc, err := schema.Compile(raw)
	if err != nil {
		return err
	}
	return sc.RequireObjectRoot()
}

func hasContent(blocks []llm.Block) bool {
	for _, b := range blocks {
		if b.Type != llm.BlockText || strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}

// Handle is a run started through the service. It is safe for
// concurrent use.
type Handle struct {
	runID, childID, provider, mode string
	parent                         *session.Log
	run                            Run

	done chan struct{} // closed once the result is known and subagent/end logged
	res  Result
	err  error

	disposeOnce sync.Once
	disposeErr  error
}

// RunID is the id shared by the run's subagent/start and subagent/end.
func (h *Handle) RunID() string { return h.runID }

// ChildID is the child session's id.
func (h *Handle) ChildID() string { return h.childID }

// Provider names the provider that started the run.
func (h *Handle) Provider() string { return h.provider }

// Mode is the run's mode (ModeOneShot).
func (h *Handle) Mode() string { return h.mode }

// Done is closed when the run has ended and subagent/end is logged.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Wait blocks until the run has ended (and subagent/end is logged) or
// ctx ends. Ending ctx does not cancel the run.
func (h *Handle) Wait(ctx context.Context) (Result, error) {
	select {
	case <-h.done:
		return h.res, h.err
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// Dispose cancels the run if it is still going, waits for subagent/end
// and releases the child. It is idempotent: every call returns the first
// call's error.
func (h *Handle) Dispose() error {
	h.disposeOnce.Do(func() {
		h.disposeErr = h.run.Dispose()
		<-h.done
	})
	return h.disposeErr
}

// observe collects the provider's result and closes the lifecycle pair,
// whether or not anyone waits.
func (h *Handle) observe() {
	defer close(h.done)
	res, err := h.run.Wait(context.Background())
	if res.ChildID == "" {
		res.ChildID = h.childID
	}
	if err != nil && (res.StopReason == "" || res.StopReason == StopCompleted) {
		res.StopReason = StopError
	}
	if err != nil && res.Diagnostic == "" {
		res.Diagnostic = err.Error()
	}
	if res.StopReason == "" {
		res.StopReason = StopError
	}
	res.Diagnostic = clip(res.Diagnostic, MaxDiagnostic)
	end := EndEvent{RunID: h.runID, ChildID: res.ChildID, StopReason: res.StopReason, Diagnostic: res.Diagnostic}
	if !res.Usage.IsZero() {
		u := res.Usage
		end.Usage = &u
	}
	if _, aerr := h.parent.Append(session.TypeSubagentEnd, end); aerr != nil {
		err = errors.Join(err, aerr)
	}
	h.res, h.err = res, err
}

// clip bounds s to n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
