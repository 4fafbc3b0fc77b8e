// Package claudecode is a subagent provider that delegates a task to
// Claude Code's headless mode:
//
//	claude -p --output-format stream-json --input-format stream-json --verbose …
//
// Each run spawns the configured command as a guarded process group (see
// package proc) in proc.ResolveDir(Options.Dir, the delegating session's cwd),
// writes the prompt as one stream-json user message on stdin and reads the
// NDJSON events Claude Code prints on stdout. Start returns once Claude has
// announced its session (system/init, or a result at once, as a failed
// resume gives), so the run's ChildID is "<provider name>/<Claude session
// id>". After the turn's result line
// stdin is closed, Claude exits and the group is torn down (confirmed
// TERM→KILL teardown, as for every out-of-process child).
//
// # Permissions
//
// The delegated permission (subagent.Request.Permission, the parent's
// state when the run started) is mapped by its sandbox mode onto Claude
// Code's own permission system. Claude enforces it, not dsh's sandbox:
//
//   - read-only (and a zero or unknown mode, failing closed):
//     --permission-mode default --disallowedTools Edit,Write,NotebookEdit.
//     The write tools are removed, and in -p mode nothing can be approved,
//     so a shell command that Claude does not classify as read-only is
//     denied (verified live: "touch" inside the workspace is refused, "ls"
//     runs). Plan mode was not chosen: it makes the model present a plan
//     instead of doing a read-only task and reporting.
//   - workspace-write (and dsh's auto preset, which has workspace-write
//     knobs): --permission-mode acceptEdits --allowedTools Bash. acceptEdits
//     accepts file edits inside the working directory and denies them
//     outside it; the edit tools are deliberately not listed in
//     --allowedTools, because an allow rule lifts that limit (verified
//     live: with Write allowed, a Write outside the workspace succeeds).
//     Bash must be allowed for a coding task (without the rule, any
//     command Claude does not recognise, such as running tests, is
//     denied), and an allowed Bash is not confined: Claude Code's
//     working-directory check no longer stops a shell command from writing
//     outside the workspace (verified live). dsh's sandbox does not apply
//     to Claude's tools.
//   - danger-full-access: --permission-mode bypassPermissions. Claude Code
//     refuses that mode when it runs as root (os.Geteuid() == 0, verified
//     live: it exits 1); dsh then falls back to acceptEdits with
//     Bash,Edit,Write,NotebookEdit,WebFetch,WebSearch allowed and says so in
//     a progress line and in the run's Diagnostic.
//
// # Model, effort and resume
//
// Request.Model (else Options.Model) is passed as --model; "" leaves
// Claude Code's own default. Request.Effort low, high and max are passed as
// --effort (Claude Code's levels are low, medium, high, xhigh, max); "off"
// has no Claude equivalent and is rejected. Request.Provider must be "",
// "anthropic" or the provider's own name: Claude Code runs Anthropic
// models.
//
// A stored Claude session is continued with [Provider.StartResume] or, to
// go through subagent.Service.Start, a context from [WithResume]: the run
// passes --resume <session id> and keeps that id (Claude reuses it).
//
// # Output, usage and diagnostics
//
// The result line's text becomes Result.Output, its usage Result.Usage
// (input, output, cache read and cache creation tokens; Claude's input
// count excludes cached tokens, as llm.Usage does). Claude's turn count
// (num_turns), its own cost estimate (total_cost_usd; not billing truth for
// custom endpoints) and the tools denied by permission rules go into the
// last progress line and Result.Diagnostic, since subagent.Result has no
// such fields. An error result (error_* subtype or is_error) is StopError with
// Claude's error text; a process that ends without a result is StopError
// with its exit status and stderr tail.
//
// # Capabilities
//
// The provider declares OutputSchema only: a request's schema is passed as
// --json-schema, and the structured_output Claude reports is validated
// again with package schema, failing closed (a missing or invalid value is
// StopError). Claude cannot be made to honour dsh's tool filter, persona or
// delegation depth, so the service refuses requests that need them.
//
// # Cancellation
//
// When the parent's context ends (StopAborted), the run is disposed
// (StopAborted) or Options.Timeout passes (StopError, "timed out after …"),
// the run sends Claude the stream-json interrupt control request (verified
// live: Claude then ends the turn with an error_during_execution result),
// waits at most InterruptGrace for a result, and then tears the process
// group down whatever Claude did. A successful result that was already on
// its way when the parent cancelled still counts as completed; after a
// timeout the run is an error either way.
package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/schema"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// DefaultName is the provider name when Options.Name is empty.
const DefaultName = "claude-code"

// DefaultCommand is the executable when Options.Command is empty.
const DefaultCommand = "claude"

// InterruptGrace is the default bound on how long a cancelled run waits for
// Claude's result after the interrupt control request before the process
// group is torn down regardless.
const InterruptGrace = 2 * time.Second

// ExitGrace bounds how long a run waits for Claude to exit once stdin is
// closed after its result, and how long it keeps reading stdout after the
// process exited (a grandchild may still hold the pipe).
const ExitGrace = 2 * time.Second

// DefaultPassthrough lists the variables Claude Code is given from dsh's
// environment besides proc.BaseEnv: its credentials and endpoint, its
// configuration directory and switches, the shell its Bash tool runs, and
// proxy and CA settings.
var DefaultPassthrough = []string{
	"ANTHROPIC_*", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_*", "SHELL",
	"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
	"NODE_EXTRA_CA_CERTS",
}

// DefaultSet are the variables always set for Claude Code (Options.Env.Set
// may override them): no auto-update, no telemetry, no non-essential
// traffic.
var DefaultSet = map[string]string{
	"DISABLE_AUTOUPDATER":                      "1",
	"DISABLE_TELEMETRY":                        "1",
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}

// Options configure a Provider.
type Options struct {
	// Name is the provider name; "" means DefaultName.
	Name string
	// Command is the Claude Code executable (looked up in dsh's PATH when
	// it has no slash); "" means DefaultCommand.
	Command string
	// Model is passed as --model when the request names none; "" leaves
	// Claude Code's configured default.
	Model string
	// Env extends the environment policy: its Passthrough is added to
	// DefaultPassthrough, its Set overrides DefaultSet.
	Env proc.EnvPolicy
	// Dir, when non-empty, overrides the working directory (otherwise the
	// delegating session's cwd). It is validated by New.
	Dir string
	// Timeout bounds a whole run, start-up included; 0 means no bound
	// beyond the caller's context. A run that times out is cancelled and
	// reported with stop reason "error".
	Timeout time.Duration
	// KillGrace is passed to proc.Spec.KillGrace; 0 is proc's default.
	KillGrace time.Duration
	// InterruptGrace bounds the wait for Claude's result after an
	// interrupt; 0 means InterruptGrace.
	InterruptGrace time.Duration
}

// Provider is a subagent.Provider running Claude Code per run. It is safe
// for concurrent use.
type Provider struct {
	o   Options
	env proc.EnvPolicy
}

var _ subagent.Provider = (*Provider)(nil)

// geteuid is os.Geteuid; tests replace it to exercise the root fallback.
var geteuid = os.Geteuid

// New validates o and returns a provider. It does not look the command
// up: a missing executable fails at Start.
func New(o Options) (*Provider, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Command == "" {
		o.Command = DefaultCommand
	}
	if o.Timeout < 0 || o.KillGrace < 0 || o.InterruptGrace < 0 {
		return nil, errors.New("claudecode: negative timeout or grace")
	}
	if o.InterruptGrace == 0 {
		o.InterruptGrace = InterruptGrace
	}
	env := proc.EnvPolicy{
		Passthrough: append(slices.Clone(DefaultPassthrough), o.Env.Passthrough...),
		Set:         map[string]string{},
	}
	for k, v := range DefaultSet {
		env.Set[k] = v
	}
	for k, v := range o.Env.Set {
		env.Set[k] = v
	}
	if _, err := env.Build(nil); err != nil {
		return nil, fmt.Errorf("claudecode: env: %w", err)
	}
	if o.Dir != "" {
		d, err := proc.ValidateOverride(o.Dir)
		if err != nil {
			return nil, fmt.Errorf("claudecode: dir: %w", err)
		}
		o.Dir = d
	}
	return &Provider{o: o, env: env}, nil
}

// Name returns the configured provider name.
func (p *Provider) Name() string { return p.o.Name }

// Capabilities declares OutputSchema (see the package comment): the
// structured result is verified by dsh, fail closed.
func (p *Provider) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{OutputSchema: true}
}

type resumeKey struct{}

// WithResume returns a context under which Start continues the stored
// Claude session sessionID (a UUID) instead of starting a new one, so a
// resume can go through subagent.Service.Start like any delegation.
func WithResume(ctx context.Context, sessionID string) context.Context {
	return context.WithValue(ctx, resumeKey{}, sessionID)
}

// StartResume is Start continuing the stored Claude session sessionID
// (--resume). The session must have been created with the same working
// directory and Claude configuration directory.
func (p *Provider) StartResume(ctx context.Context, req subagent.Request, sessionID string) (subagent.Run, error) {
	return p.Start(WithResume(ctx, sessionID), req)
}

// Start spawns Claude Code, sends the prompt and waits until Claude
// announces its session, so that the returned run's ChildID is known. ctx
// bounds the whole run. A failed Start tears the process group down and
// returns an error including Claude's stderr tail.
func (p *Provider) Start(ctx context.Context, req subagent.Request) (subagent.Run, error) {
	if req.Parent == nil {
		return nil, invalid("a subagent request needs the parent session")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claudecode: not started: %w", context.Cause(ctx))
	}
	prompt, err := promptLine(req.Prompt)
	if err != nil {
		return nil, err
	}
	resume, _ := ctx.Value(resumeKey{}).(string)
	if resume != "" {
		if _, err := uuid.Parse(resume); err != nil {
			return nil, invalid("resume session id %q is not a UUID", resume)
		}
	}
	var sc *schema.Schema
	if len(req.OutputSchema) > 0 {
		if sc, err = schema.Compile(req.OutputSchema); err != nil {
			return nil, invalid("outputSchema: %v", err)
		}
	}
	argv, note, err := p.argv(req, resume, geteuid() == 0)
	if err != nil {
		return nil, err
	}
	dir, err := proc.ResolveDir(p.o.Dir, req.Parent.Header().Cwd)
	if err != nil {
		return nil, fmt.Errorf("claudecode: %w", err)
	}
	// The process lives until the run tears it down: the run, not proc,
	// reacts to ctx so that the interrupt is sent before teardown.
	child, err := proc.Start(context.WithoutCancel(ctx), proc.Spec{
		Argv: argv, Dir: dir, Env: p.env, KillGrace: p.o.KillGrace,
	})
	if err != nil {
		return nil, fmt.Errorf("claudecode: start %s: %w", p.o.Name, err)
	}
	r := newRun(p, child, req.Progress, sc, note, resume)
	if note != "" {
		r.progress(note)
	}
	var deadline <-chan time.Time
	if p.o.Timeout > 0 {
		t := time.NewTimer(p.o.Timeout)
		r.stopTimer = t.Stop
		deadline = t.C
	}
	go r.read()
	r.send(prompt)
	if err := r.awaitSession(ctx, deadline); err != nil {
		r.stopTimer()
		cleanup := r.handle.Dispose()
		<-r.readDone
		msg := fmt.Sprintf("claudecode: %s did not start a session: %v%s", p.o.Name, err, r.exitText())
		if cleanup != nil {
			msg += "; " + cleanup.Error()
		}
		return nil, errors.New(clip(msg+r.stderrSuffix(), subagent.MaxDiagnostic))
	}
	go r.loop(ctx, deadline)
	return r, nil
}

// argv builds Claude Code's command line; note is the root fallback
// notice, if it applied.
func (p *Provider) argv(req subagent.Request, resume string, root bool) (argv []string, note string, err error) {
	switch req.Provider {
	case "", "anthropic", p.o.Name:
	default:
		return nil, "", invalid("%s runs Anthropic models only, not provider %q", p.o.Name, req.Provider)
	}
	argv = []string{p.o.Command, "-p", "--output-format", "stream-json", "--input-format", "stream-json", "--verbose"}
	model := req.Model
	if model == "" {
		model = p.o.Model
	}
	if model != "" {
		argv = append(argv, "--model", model)
	}
	switch llm.Effort(req.Effort) {
	case "":
	case llm.EffortLow, llm.EffortHigh, llm.EffortMax:
		argv = append(argv, "--effort", req.Effort)
	default:
		return nil, "", invalid("%s supports reasoning effort low, high or max, not %q", p.o.Name, req.Effort)
	}
	if resume != "" {
		argv = append(argv, "--resume", resume)
	}
	perm, note := PermissionArgs(req.Permission.Mode, root)
	argv = append(argv, perm...)
	if len(req.OutputSchema) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, req.OutputSchema); err != nil {
			return nil, "", invalid("outputSchema: %v", err)
		}
		argv = append(argv, "--json-schema", buf.String())
	}
	return argv, note, nil
}

// Tool sets of the permission mapping.
var (
	writeTools      = []string{"Edit", "Write", "NotebookEdit"}
	workspaceTools  = []string{"Bash"}
	fullAccessTools = []string{"Bash", "Edit", "Write", "NotebookEdit", "WebFetch", "WebSearch"}
)

// PermissionArgs returns Claude Code's permission flags for a delegated
// sandbox mode (see the package comment) and, when the root fallback for
// danger-full-access applied, a notice saying so.
func PermissionArgs(mode sandbox.Mode, root bool) (args []string, note string) {
	switch mode {
	case sandbox.WorkspaceWrite:
		return []string{"--permission-mode", "acceptEdits", "--allowedTools", strings.Join(workspaceTools, ",")}, ""
	case sandbox.DangerFullAccess:
		if !root {
			return []string{"--permission-mode", "bypassPermissions"}, ""
		}
		allowed := strings.Join(fullAccessTools, ",")
		return []string{"--permission-mode", "acceptEdits", "--allowedTools", allowed},
			"claude-code: running as root, where Claude Code refuses bypassPermissions; full access falls back to acceptEdits with " + allowed + " allowed"
	default:
		return []string{"--permission-mode", "default", "--disallowedTools", strings.Join(writeTools, ",")}, ""
	}
}

// promptLine renders the task as one stream-json user message: text
// blocks, and image blocks as base64 sources.
func promptLine(blocks []llm.Block) ([]byte, error) {
	type source struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	type block struct {
		Type   string  `json:"type"`
		Text   string  `json:"text,omitempty"`
		Source *source `json:"source,omitempty"`
	}
	var content []block
	for _, b := range blocks {
		switch {
		case b.Type == llm.BlockText && strings.TrimSpace(b.Text) != "":
			content = append(content, block{Type: "text", Text: b.Text})
		case b.Type == llm.BlockImage && b.Data != "" && b.MediaType != "":
			content = append(content, block{Type: "image", Source: &source{Type: "base64", MediaType: b.MediaType, Data: b.Data}})
		}
	}
	if len(content) == 0 {
		return nil, invalid("the prompt has no text or image content")
	}
	line, err := json.Marshal(map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": content},
	})
	if err != nil {
		return nil, fmt.Errorf("claudecode: encode prompt: %w", err)
	}
	return append(line, '\n'), nil
}

func invalid(format string, args ...any) error {
	return &subagent.Error{Code: subagent.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}
