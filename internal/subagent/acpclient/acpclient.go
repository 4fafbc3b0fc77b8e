// Package acpclient is a subagent provider that delegates a task to an
// external agent speaking the Agent Client Protocol (ACP) over stdio.
//
// Each run spawns the configured command as a guarded process group (see
// package oop), performs initialize, session/new and one session/prompt
// turn over JSON-RPC 2.0, collects the streamed session/update
// notifications and tears the whole group down when the turn ends, is
// cancelled or the run is disposed.
//
// The provider declares no capabilities: the out-of-process agent cannot be
// forced to honour an output schema, a tool filter, a persona or the
// delegation depth cap, so the subagent service refuses such requests before
// anything is started.
//
// # Updates
//
// The answer (Result.Output) is the text of every agent_message_chunk of
// the turn; text after a message boundary (see Progress) is set off by a
// blank line. Tool calls are tracked by toolCallId with their last status.
// The activity log, the tail of Result.Diagnostic after its summary lines
// (the oldest lines are dropped when it would not fit), records each call's
// first sighting, every change of its status (not updates that only replace
// content) and every permission answer. Other variants (agent_thought_chunk,
// user_message_chunk, available_commands_update, current_mode_update,
// config_option_update, session_info_update, usage_update, unknown ones)
// are tolerated and ignored, as are updates for another sessionId; a
// malformed optional field loses only itself.
//
// # Progress
//
// When the request has a Progress callback, the run reports one line per
// event, in the order of the updates ("[<kind>]" and "<title>" are left
// out when the agent sent none; text is put on one line and clipped):
//
//	agent: <text>                         message text, when the message ended
//	tool <id> [<kind>] <title>: started   first sighting of a tool call
//	tool <id> <title>: completed          a call reached completed (or failed)
//	plan: [x] <a>; [>] <b>; [ ] <c>       a changed plan: completed, in progress, other
//	permission <id> <title>: <answer>     the option kind chosen, or cancelled
//	tool <id> <title>: closed (prompt ended while <status>)
//
// ACP has no explicit end of a message, so accumulated message text is
// reported as an "agent:" line at the next boundary: a new messageId, any
// other progress line (a tool call starting or finishing, a plan, a
// permission answer), and the end of the turn. Lines are reported from the
// connection's goroutines with the run's lock held, and never once the turn
// ended: updates racing with the end are dropped, so no line follows the
// published result.
//
// # Closing tool calls
//
// Agents do not always finish their tool calls (codex-acp leaves executed
// commands in_progress). When the turn ends (session/prompt returned with
// any stop reason or failed, or the run ended by cancellation, timeout or
// the agent's exit) every tracked call whose last status is neither
// completed nor failed is closed: the "closed" line above is recorded and
// reported, and the diagnostic's first lines say how many calls were left
// open ("1 tool call left open when the prompt ended").
//
// # Stop reasons and usage
//
// end_turn is completed, max_tokens and max_turn_requests are max-tokens
// (the latter with a diagnostic line), refusal is refusal, cancelled is
// aborted; anything else, a missing stopReason included, is an error. A run
// whose Timeout fired is an error whatever the agent answered. The prompt
// response's usage (unstable in ACP) is read leniently, a malformed counter
// counting 0, and mapped onto llm.Usage's disjoint counters: ACP does not
// say whether inputTokens includes the cached tokens or outputTokens the
// thought tokens, so totalTokens decides when it matches a reading;
// otherwise cache is taken as excluded from input and thoughts as included
// in output unless they exceed it.
//
// # Permissions
//
// Permission requests from the agent are answered from the delegating
// session's permission state, without asking anyone: the client cannot tell
// whether a requested action stays inside the workspace, so only
// danger-full-access allows (first allow_once option, else allow_always);
// every other mode, workspace-write included, rejects (first reject_once
// option, else reject_always). When no option of the wanted kind exists, or
// the run is being cancelled, the request is answered "cancelled"; option ids
// are never invented.
package acpclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// ProtocolVersion is the ACP protocol version the client offers.
const ProtocolVersion = 1

// CancelGrace bounds how long a cancelled run waits for the agent to answer
// its prompt with stopReason "cancelled" before the process group is torn
// down regardless.
const CancelGrace = 2 * time.Second

// ExitGrace bounds how long the run keeps reading the agent's output after
// the agent process exited, to pick up a prompt response still in the pipe.
const ExitGrace = time.Second

// Options configure a Provider.
type Options struct {
	// Name is the provider name, e.g. "acp:myagent". Required.
	Name string
	// Command is the agent's argv. Required.
	Command []string
	// Env is the agent's environment policy.
	Env proc.EnvPolicy
	// Dir, when non-empty, overrides the working directory (otherwise the
	// delegating session's cwd). It is validated by New.
	Dir string
	// Timeout bounds a whole run (handshake and turn); 0 means no bound
	// beyond the caller's context. A run that times out is cancelled and
	// reported with stop reason "error".
	Timeout time.Duration
	// KillGrace is passed to proc.Spec.KillGrace; 0 is proc's default.
	KillGrace time.Duration
}

// Provider is a subagent.Provider running an ACP agent per run.
type Provider struct {
	o Options
}

var _ subagent.Provider = (*Provider)(nil)

// New validates o and returns a provider.
func New(o Options) (*Provider, error) {
	if o.Name == "" {
		return nil, errors.New("acpclient: provider name is empty")
	}
	if len(o.Command) == 0 || o.Command[0] == "" {
		return nil, errors.New("acpclient: command is empty")
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("acpclient: negative timeout %v", o.Timeout)
	}
	if _, err := o.Env.Build(nil); err != nil {
		return nil, fmt.Errorf("acpclient: env: %w", err)
	}
	if o.Dir != "" {
		d, err := proc.ValidateOverride(o.Dir)
		if err != nil {
			return nil, fmt.Errorf("acpclient: dir: %w", err)
		}
		o.Dir = d
	}
	o.Command = append([]string(nil), o.Command...)
	return &Provider{o: o}, nil
}

// Name returns the configured provider name.
func (p *Provider) Name() string { return p.o.Name }

// Capabilities returns the zero value: an out-of-process agent honours none
// of the parent-enforced features.
func (p *Provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// Start spawns the agent, performs the handshake (initialize, session/new)
// and sends the prompt. The returned run's ChildID is the provider name and
// the ACP sessionId joined by "/". A failed Start tears the process group
// down and returns an error including the agent's stderr tail.
func (p *Provider) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	if req.Parent == nil {
		return nil, errors.New("acpclient: request has no parent session")
	}
	text := promptText(req.Prompt)
	if text == "" {
		return nil, errors.New("acpclient: prompt has no text")
	}
	dir, err := proc.ResolveDir(p.o.Dir, req.Parent.Header().Cwd)
	if err != nil {
		return nil, fmt.Errorf("acpclient: %w", err)
	}
	// The process lives until the run tears it down: the run, not proc,
	// reacts to ctx so that session/cancel is sent before teardown.
	child, err := proc.Start(context.WithoutCancel(ctx), proc.Spec{
		Argv: p.o.Command, Dir: dir, Env: p.o.Env, KillGrace: p.o.KillGrace,
	})
	if err != nil {
		return nil, fmt.Errorf("acpclient: start %s: %w", p.o.Name, err)
	}
	r := newRun(p, child, req.Permission, dir, req.Progress)
	var deadline <-chan time.Time
	if p.o.Timeout > 0 {
		t := time.NewTimer(p.o.Timeout)
		r.stopTimer = t.Stop
		deadline = t.C
	}
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	if p.o.Timeout > 0 {
		var c context.CancelFunc
		hctx, c = context.WithTimeout(hctx, p.o.Timeout)
		defer c()
	}
	if err := r.handshake(hctx); err != nil {
		r.stopTimer()
		r.mu.Lock()
		r.ended = true // no progress from a run that never started
		r.mu.Unlock()
		cleanup := r.handle.Dispose()
		r.conn.Close()
		msg := fmt.Sprintf("acpclient: %s handshake: %v", p.o.Name, err)
		if cleanup != nil {
			msg += "; " + cleanup.Error()
		}
		return nil, errors.New(clip(msg+stderrSuffix(child), subagent.MaxDiagnostic))
	}
	go r.loop(ctx, deadline, text)
	return r, nil
}

func promptText(blocks []llm.Block) string {
	var s string
	for _, b := range blocks {
		if b.Type == llm.BlockText && b.Text != "" {
			if s != "" {
				s += "\n\n"
			}
			s += b.Text
		}
	}
	return s
}
