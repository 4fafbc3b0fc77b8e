package codex

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// ProviderName is the name the Codex provider registers under in the
// subagent service.
const ProviderName = "codex"

// Subagent adapts the provider to the subagent service, so the generic
// delegation tools, listings and background jobs can reach Codex. It
// declares no capabilities: Codex cannot be made to honour dsh's tool
// filter, persona or depth cap, and a service-level output schema would
// need structured_output, which Codex does not have (subagent_codex
// offers output_schema itself).
type Subagent struct{ P *Provider }

var _ subagent.Provider = Subagent{}

// Name returns ProviderName.
func (s Subagent) Name() string { return ProviderName }

// Capabilities returns the zero value.
func (s Subagent) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// MaxModeFor maps a dsh sandbox mode to the widest Codex permission mode a
// session in that mode may delegate with.
func MaxModeFor(m sandbox.Mode) string {
	switch m {
	case sandbox.DangerFullAccess:
		return ModeFullAccess
	case sandbox.WorkspaceWrite:
		return ModeWorkspaceWrite
	}
	return ModeReadOnly
}

// Start validates the request, starts the delegation and returns once the
// thread is open (its id is the child id) or the run ended.
func (s Subagent) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	if req.Parent == nil {
		return nil, errors.New("codex: request has no parent session")
	}
	var parts []string
	for _, b := range req.Prompt {
		if b.Type == llm.BlockText && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	p := Params{Description: req.Label, Prompt: strings.Join(parts, "\n\n"), Model: req.Model, SessionKey: req.Parent.Header().ID}
	if req.Effort != "" {
		// dsh's effort scale (off/low/high/max) mapped onto Codex's.
		p.Effort = map[string]string{"off": "none", "low": "low", "high": "high", "max": "xhigh"}[req.Effort]
	}
	caller := Caller{Cwd: req.Parent.Header().Cwd, MaxMode: MaxModeFor(req.Permission.Mode)}
	if _, err := resolve(p, &s.P.cfg, s.P.maxMode(caller), firstNonEmpty(s.P.cfg.Dir, caller.Cwd)); err != nil {
		return nil, fmt.Errorf("codex: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	r := &subRun{cancel: cancel, done: make(chan struct{}), opened: make(chan string, 1)}
	go func() {
		defer close(r.done)
		r.out = s.P.Delegate(runCtx, p, caller, Observer{
			Checkpoint: func(c Checkpoint) {
				if c.Name == "thread" {
					id, _ := c.Data["threadId"].(string)
					select {
					case r.opened <- id:
					default:
					}
				}
			},
			Progress: req.Progress,
		})
	}()
	select {
	case id := <-r.opened:
		r.childID = ProviderName + "/" + id
	case <-r.done:
		if r.out.ThreadID != "" {
			r.childID = ProviderName + "/" + r.out.ThreadID
		} else {
			r.childID = ProviderName + "/" + r.out.RunID
		}
	}
	return r, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type subRun struct {
	cancel  context.CancelFunc
	done    chan struct{}
	opened  chan string
	childID string
	out     Outcome
}

func (r *subRun) ChildID() string { return r.childID }

func (r *subRun) Wait(ctx context.Context) (subagent.Result, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return subagent.Result{}, ctx.Err()
	}
	return toResult(r.out, r.childID), nil
}

func (r *subRun) Dispose() error {
	r.cancel()
	<-r.done
	if !r.out.Cleanup.Confirmed && r.out.Process.Pid != 0 {
		return fmt.Errorf("codex: cleanup of process group %d not confirmed", r.out.Process.Pgid)
	}
	return nil
}

func toResult(out Outcome, childID string) subagent.Result {
	res := subagent.Result{ChildID: childID}
	if out.Text != "" {
		text := out.Text
		if out.Structured == nil && durable(out) && out.Status == StatusCompleted {
			text += "\n\n" + Marker(out)
		}
		res.Output = []llm.Block{llm.TextBlock(text)}
	}
	switch out.Status {
	case StatusCompleted:
		res.StopReason = subagent.StopCompleted
	case StatusAborted:
		res.StopReason = subagent.StopAborted
	default:
		res.StopReason = subagent.StopError
	}
	if out.Error != "" {
		res.Diagnostic = clip(out.Category+": "+out.Error, subagent.MaxDiagnostic)
	}
	if r := out.Usage.Run; r != nil {
		res.Usage = llm.Usage{InputTokens: r.InputTokens - r.CachedInputTokens, CacheReadTokens: r.CachedInputTokens, OutputTokens: r.OutputTokens, ReasoningTokens: r.ReasoningOutputTokens}
	}
	return res
}
