package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// env is one pipeline under test with an instrumented "echo" tool.
type env struct {
	reg      *Registry
	p        *Pipeline
	def      Definition
	bodyRuns atomic.Int32
	// body replaces the echo body when set.
	body func(ctx context.Context, c *Call) (Result, error)
}

func newEnv(t *testing.T, tweak func(*Definition)) *env {
	t.Helper()
	e := &env{reg: NewRegistry()}
	e.def = Definition{
		Name:        "echo",
		Description: "echoes its arguments",
		Parameters:  json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx context.Context, c *Call) (Result, error) {
			e.bodyRuns.Add(1)
			if e.body != nil {
				return e.body(ctx, c)
			}
			return Text("echo " + string(c.Arguments)), nil
		},
	}
	if tweak != nil {
		tweak(&e.def)
	}
	mustRegister(t, e.reg, "", e.def)
	e.p = NewPipeline(e.reg)
	return e
}

func textOf(r Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return b.String()
}

func code(r Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// decidingApprover answers with a fixed decision; Approve must not be used.
type decidingApprover struct{ d ApprovalDecision }

func (a decidingApprover) Approve(context.Context, ApprovalRequest) (ApprovalOutcome, error) {
	panic("the pipeline must prefer Decide")
}

func (a decidingApprover) Decide(context.Context, ApprovalRequest) (ApprovalDecision, error) {
	return a.d, nil
}

type approverFunc func(ctx context.Context, req ApprovalRequest) (ApprovalOutcome, error)

func (f approverFunc) Approve(ctx context.Context, req ApprovalRequest) (ApprovalOutcome, error) {
	return f(ctx, req)
}

func preReturning(d Decision) PreExecute {
	return func(ctx context.Context, c *Call, next func(context.Context) Decision) Decision { return d }
}

func approveWith(out ApprovalOutcome, err error) func(e *env) {
	return func(e *env) {
		e.p.UsePreExecute(preReturning(Decision{Kind: Ask, Reason: "runs a command"}))
		e.p.SetApprover(approverFunc(func(ctx context.Context, req ApprovalRequest) (ApprovalOutcome, error) {
			if req.ToolName != "echo" || req.CallID != "call-1" || req.Reason != "runs a command" || string(req.Arguments) != `{"a":1}` {
				return Rejected, errors.New("bad approval request")
			}
			return out, err
		}))
	}
}

func TestPipelineBranches(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		raw      string
		args     json.RawMessage // preset Call.Arguments
		toolName string
		setup    func(e *env)
		body     func(ctx context.Context, c *Call) (Result, error)
		project  func(c *Call, r Result) []llm.Block
		cancel   bool // caller ctx cancelled before Run

		wantErr  bool
		wantCode string
		wantText string // substring of the content
		wantRuns int32
	}{
		{name: "success", raw: `{"a":1}`, wantText: `echo {"a":1}`, wantRuns: 1},
		{name: "empty arguments become {}", raw: "", wantText: "echo {}", wantRuns: 1},
		{name: "whitespace arguments become {}", raw: " \n", wantText: "echo {}", wantRuns: 1},
		{name: "preset arguments kept", raw: "{broken", args: json.RawMessage(`{"pre":true}`), wantText: `echo {"pre":true}`, wantRuns: 1},
		{name: "unknown tool", toolName: "nope", wantErr: true, wantCode: CodeUnknownTool,
			wantText: "Error: unknown tool nope; available tools: echo"},
		{name: "invalid JSON", raw: `{"a":`, wantErr: true, wantCode: CodeInvalidArgs,
			wantText: `were not valid JSON (unexpected end of JSON input); resend the call with the arguments as one JSON object. Received: {"a":`},
		{name: "invalid JSON excerpt bounded", raw: `{"a":"` + strings.Repeat("x", 5000), wantErr: true, wantCode: CodeInvalidArgs,
			wantText: "bytes in all)"},
		{name: "non-object arguments", raw: `[1,2]`, wantErr: true, wantCode: CodeInvalidArgs, wantText: "were not a JSON object"},
		{name: "pre deny", raw: `{}`, setup: func(e *env) { e.p.UsePreExecute(preReturning(Decision{Kind: Deny, Reason: "not here"})) },
			wantErr: true, wantCode: CodeDenied, wantText: "Error: not here"},
		{name: "pre deny with info code", raw: `{}`, setup: func(e *env) {
			e.p.UsePreExecute(preReturning(Decision{Kind: Deny, Reason: "sandboxed", Info: &Error{Code: "SANDBOX_DENIED", Reason: "detail"}}))
		}, wantErr: true, wantCode: "SANDBOX_DENIED", wantText: "Error: sandboxed"},
		{name: "pre cancel", raw: `{}`, setup: func(e *env) { e.p.UsePreExecute(preReturning(Decision{Kind: Cancel})) },
			wantErr: true, wantCode: CodeAborted, wantText: "Error: tool call cancelled"},
		{name: "pre invalid decision fails closed", raw: `{}`, setup: func(e *env) { e.p.UsePreExecute(preReturning(Decision{})) },
			wantErr: true, wantCode: CodeDenied, wantText: "invalid policy decision"},
		{name: "pre next allows", raw: `{}`, setup: func(e *env) {
			e.p.UsePreExecute(func(ctx context.Context, c *Call, next func(context.Context) Decision) Decision { return next(ctx) })
		}, wantText: "echo {}", wantRuns: 1},
		{name: "ask without approver", raw: `{}`, setup: func(e *env) { e.p.UsePreExecute(preReturning(Decision{Kind: Ask})) },
			wantErr: true, wantCode: CodeDenied, wantText: "not approved: approval unavailable"},
		{name: "ask allowed once", raw: `{"a":1}`, setup: approveWith(AllowedOnce, nil), wantText: "echo", wantRuns: 1},
		{name: "ask rejected", raw: `{"a":1}`, setup: approveWith(Rejected, nil), wantErr: true, wantCode: CodeDenied, wantText: "rejected by user"},
		{name: "ask rejected by reviewer", raw: `{"a":1}`, setup: func(e *env) {
			e.p.UsePreExecute(preReturning(Decision{Kind: Ask}))
			e.p.SetApprover(decidingApprover{ApprovalDecision{Outcome: Rejected, By: "the automatic reviewer", Reason: "deletes the repository"}})
		}, wantErr: true, wantCode: CodeDenied, wantText: "not approved: rejected by the automatic reviewer: deletes the repository"},
		{name: "ask unavailable by policy", raw: `{"a":1}`, setup: func(e *env) {
			e.p.UsePreExecute(preReturning(Decision{Kind: Ask}))
			e.p.SetApprover(decidingApprover{ApprovalDecision{Outcome: Unavailable, By: "the approval policy", Reason: "approval policy is never"}})
		}, wantErr: true, wantCode: CodeDenied, wantText: "approval unavailable: approval policy is never"},
		{name: "ask cancelled", raw: `{"a":1}`, setup: approveWith(Cancelled, nil), wantErr: true, wantCode: CodeDenied, wantText: "approval cancelled"},
		{name: "ask unavailable", raw: `{"a":1}`, setup: approveWith(Unavailable, nil), wantErr: true, wantCode: CodeDenied, wantText: "approval unavailable"},
		{name: "ask approver error", raw: `{"a":1}`, setup: approveWith(AllowedOnce, boom), wantErr: true, wantCode: CodeDenied, wantText: "approval unavailable"},
		{name: "ask odd outcome", raw: `{"a":1}`, setup: approveWith("allowed-always", nil), wantErr: true, wantCode: CodeDenied, wantText: `"allowed-always"`},
		{name: "guard denies", raw: `{}`, setup: func(e *env) {
			e.p.UseGuard(func(c *Call) string { return "" })
			e.p.UseGuard(func(c *Call) string { return "outside workspace" })
		}, wantErr: true, wantCode: CodeDenied, wantText: "Error: outside workspace"},
		{name: "guard after allowed approval still denies", raw: `{"a":1}`, setup: func(e *env) {
			approveWith(AllowedOnce, nil)(e)
			e.p.UseGuard(func(c *Call) string { return "no" })
		}, wantErr: true, wantCode: CodeDenied, wantText: "Error: no"},
		{name: "cancelled before dispatch", raw: `{}`, cancel: true, wantErr: true, wantCode: CodeAborted, wantText: "tool call cancelled"},
		{name: "body plain error", raw: `{}`, body: func(ctx context.Context, c *Call) (Result, error) { return Result{}, boom },
			wantErr: true, wantCode: CodeFailed, wantText: "Error: boom", wantRuns: 1},
		{name: "body coded error", raw: `{}`, body: func(ctx context.Context, c *Call) (Result, error) {
			return Result{}, Errorf("LSP_UNAVAILABLE", "no server")
		}, wantErr: true, wantCode: "LSP_UNAVAILABLE", wantText: "Error: no server", wantRuns: 1},
		{name: "body wrapped coded error keeps the code", raw: `{}`, body: func(ctx context.Context, c *Call) (Result, error) {
			return Result{}, fmt.Errorf("fetching: %w", Errorf("WEB_PROVIDER_ERROR", "503"))
		}, wantErr: true, wantCode: "WEB_PROVIDER_ERROR", wantText: "Error: 503", wantRuns: 1},
		{name: "body panic", raw: `{}`, body: func(ctx context.Context, c *Call) (Result, error) { panic("kaboom") },
			wantErr: true, wantCode: CodePanic, wantText: "Error: tool echo panicked: kaboom", wantRuns: 1},
		{name: "pre panic", raw: `{}`, setup: func(e *env) {
			e.p.UsePreExecute(func(ctx context.Context, c *Call, next func(context.Context) Decision) Decision { panic("pre") })
		}, wantErr: true, wantCode: CodePanic, wantText: "panicked in pre-execute: pre"},
		{name: "approver panic", raw: `{}`, setup: func(e *env) {
			e.p.UsePreExecute(preReturning(Decision{Kind: Ask}))
			e.p.SetApprover(approverFunc(func(context.Context, ApprovalRequest) (ApprovalOutcome, error) { panic("ui gone") }))
		}, wantErr: true, wantCode: CodePanic, wantText: "panicked in approval"},
		{name: "guard panic", raw: `{}`, setup: func(e *env) { e.p.UseGuard(func(c *Call) string { panic("g") }) },
			wantErr: true, wantCode: CodePanic, wantText: "panicked in guard"},
		{name: "wrapper panic", raw: `{}`, setup: func(e *env) {
			e.p.UseExecute(func(ctx context.Context, c *Call, next func(context.Context) (Result, error)) (Result, error) {
				panic("w")
			})
		}, wantErr: true, wantCode: CodePanic, wantText: "panicked in execute"},
		{name: "post panic", raw: `{}`, setup: func(e *env) {
			e.p.UsePostExecute(func(ctx context.Context, c *Call, r Result) PostDecision { panic("p") })
		}, wantErr: true, wantCode: CodePanic, wantText: "panicked in post-execute", wantRuns: 1},
		{name: "wrapper error becomes failure", raw: `{}`, setup: func(e *env) {
			e.p.UseExecute(func(ctx context.Context, c *Call, next func(context.Context) (Result, error)) (Result, error) {
				return Result{}, Errorf("RATE_LIMITED", "slow down")
			})
		}, wantErr: true, wantCode: "RATE_LIMITED", wantText: "Error: slow down"},
		{name: "post accept replaces content", raw: `{}`, setup: func(e *env) {
			e.p.UsePostExecute(func(ctx context.Context, c *Call, r Result) PostDecision {
				return PostDecision{Kind: Accept, Content: []llm.Block{llm.TextBlock("replaced")}}
			})
		}, wantText: "replaced", wantRuns: 1},
		{name: "post accept without content keeps it", raw: `{}`, setup: func(e *env) {
			e.p.UsePostExecute(func(ctx context.Context, c *Call, r Result) PostDecision { return PostDecision{Kind: Accept} })
		}, wantText: "echo {}", wantRuns: 1},
		{name: "post block stops the chain", raw: `{}`, setup: func(e *env) {
			e.p.UsePostExecute(func(ctx context.Context, c *Call, r Result) PostDecision {
				return PostDecision{Kind: Block, Feedback: []llm.Block{llm.TextBlock("secret leaked; redo")}}
			})
			e.p.UsePostExecute(func(ctx context.Context, c *Call, r Result) PostDecision {
				return PostDecision{Kind: Accept, Content: []llm.Block{llm.TextBlock("must not run")}}
			})
		}, wantErr: true, wantCode: CodeBlocked, wantText: "secret leaked; redo", wantRuns: 1},
		{name: "project content applies to body results", raw: `{}`,
			project:  func(c *Call, r Result) []llm.Block { return []llm.Block{llm.TextBlock("projected")} },
			wantText: "projected", wantRuns: 1},
		{name: "project content skips denials", raw: `{}`,
			setup:   func(e *env) { e.p.UseGuard(func(c *Call) string { return "denied" }) },
			project: func(c *Call, r Result) []llm.Block { return []llm.Block{llm.TextBlock("projected")} },
			wantErr: true, wantCode: CodeDenied, wantText: "Error: denied"},
		{name: "project content skips wrapper short circuit", raw: `{}`,
			setup: func(e *env) {
				e.p.UseExecute(func(ctx context.Context, c *Call, next func(context.Context) (Result, error)) (Result, error) {
					return Text("cached"), nil
				})
			},
			project:  func(c *Call, r Result) []llm.Block { return []llm.Block{llm.TextBlock("projected")} },
			wantText: "cached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(d *Definition) { d.ProjectContent = tt.project })
			e.body = tt.body
			if tt.setup != nil {
				tt.setup(e)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			name := tt.toolName
			if name == "" {
				name = "echo"
			}
			c := &Call{ID: "call-1", Name: name, RawArguments: tt.raw, Arguments: tt.args}
			r := e.p.Run(ctx, c)
			if r.IsError != tt.wantErr || code(r) != tt.wantCode {
				t.Fatalf("result isError=%v code=%q (%q); want isError=%v code=%q", r.IsError, code(r), textOf(r), tt.wantErr, tt.wantCode)
			}
			if !strings.Contains(textOf(r), tt.wantText) {
				t.Fatalf("content %q does not contain %q", textOf(r), tt.wantText)
			}
			if got := e.bodyRuns.Load(); got != tt.wantRuns {
				t.Fatalf("body ran %d times, want %d", got, tt.wantRuns)
			}
			if r.IsError && len(textOf(r)) > 2000 {
				t.Fatalf("error content is %d bytes; want it bounded", len(textOf(r)))
			}
		})
	}
}

func TestPipelineFlush(t *testing.T) {
	tests := []struct {
		name     string
		flushErr error
		wantCode string
		wantRuns int32
	}{
		{"flush ok runs body after flush", nil, "", 1},
		{"flush failure skips body", errors.New("disk full"), CodePersistenceFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var flushed atomic.Bool
			e.body = func(ctx context.Context, c *Call) (Result, error) {
				if !flushed.Load() {
					t.Error("body ran before flush")
				}
				return Text("ran"), nil
			}
			c := &Call{Name: "echo", Flush: func(ctx context.Context) error {
				flushed.Store(true)
				return tt.flushErr
			}}
			r := e.p.Run(context.Background(), c)
			if code(r) != tt.wantCode || e.bodyRuns.Load() != tt.wantRuns {
				t.Fatalf("code=%q runs=%d, want %q %d (%q)", code(r), e.bodyRuns.Load(), tt.wantCode, tt.wantRuns, textOf(r))
			}
			if tt.flushErr != nil && (r.Error.Reason != "disk full" || strings.Contains(textOf(r), "disk full")) {
				t.Fatalf("flush error should be user-facing Reason only: reason=%q content=%q", r.Error.Reason, textOf(r))
			}
		})
	}
}

func TestPipelineNilCallAndNilRegistry(t *testing.T) {
	p := NewPipeline(NewRegistry())
	if r := p.Run(context.Background(), nil); !r.IsError {
		t.Fatalf("nil call: %+v", r)
	}
	p = NewPipeline(nil)
	if r := p.Run(context.Background(), &Call{Name: "x"}); code(r) != CodePanic {
		t.Fatalf("nil registry: code %q", code(r))
	}
}

func TestUnknownToolScopedListBounded(t *testing.T) {
	reg := NewRegistry()
	for i := range maxListedTools + 7 {
		mustRegister(t, reg, "", defNamed(fmt.Sprintf("t%02d", i), ""))
	}
	mustRegister(t, reg, "kid", defNamed("kid_only", ""))
	p := NewPipeline(reg)
	// 58 visible tools in scope kid: 50 listed ("kid_only" sorts first), 8 more.
	r := p.Run(context.Background(), &Call{Name: "nope", Scope: "kid"})
	if code(r) != CodeUnknownTool || !strings.Contains(textOf(r), "available tools: kid_only, t00,") ||
		!strings.Contains(textOf(r), "t48, … (8 more)") {
		t.Fatalf("got %q", textOf(r))
	}
	// A scoped tool is invisible from other scopes.
	r = p.Run(context.Background(), &Call{Name: "kid_only", Scope: "other"})
	if code(r) != CodeUnknownTool {
		t.Fatalf("scoped tool visible from another scope: %q", textOf(r))
	}
}

func TestUnknownToolExplained(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, "", defNamed("present", ""))
	reg.AddExplainer(func(name string) *Error { return nil })
	reg.AddExplainer(func(name string) *Error {
		if name == "withdrawn" {
			return Errorf("SERVER_DOWN", "withdrawn is unavailable while its server is down")
		}
		return nil
	})
	p := NewPipeline(reg)
	if r := p.Run(context.Background(), &Call{Name: "withdrawn"}); code(r) != "SERVER_DOWN" || !strings.Contains(textOf(r), "server is down") {
		t.Fatalf("explained name: code %q, %q", code(r), textOf(r))
	}
	if r := p.Run(context.Background(), &Call{Name: "other"}); code(r) != CodeUnknownTool {
		t.Fatalf("unexplained name: code %q", code(r))
	}
}
