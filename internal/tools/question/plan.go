package question

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// ExitName is the model-facing name of the plan tool.
const ExitName = "exit_plan_mode"

// Sources of a plan/mode change.
const (
	SourceUser         = "user"
	SourcePlanApproved = "plan-approved"
)

// SectionPlan is the runtime-context section of plan mode.
const SectionPlan = "plan:policy"

// MaxPlan bounds a plan's size.
const MaxPlan = 64 << 10

//go:embed exit_plan_mode.md
var exitDescription string

// PlanMode is the payload of plan/mode.
type PlanMode struct {
	Active bool   `json:"active"`
	Source string `json:"source,omitempty"`
}

// Active reports whether plan mode is on in log: its latest plan/mode
// event says so. The state is in the log, so it survives resume and fork.
func Active(log *session.Log) bool {
	ev, ok := log.Latest(session.TypePlanMode)
	if !ok {
		return false
	}
	var p PlanMode
	return ev.Decode(&p) == nil && p.Active
}

// everActive reports whether log has any plan/mode event.
func everActive(log *session.Log) bool {
	_, ok := log.Latest(session.TypePlanMode)
	return ok
}

// readOnlyTools may run in plan mode: they read, or touch only the
// session's own bookkeeping. bash runs too, but in the read-only sandbox
// (the permission layer clamps its policy, see permission.Config.PlanMode);
// str_replace_based_edit_tool only with command view.
var readOnlyTools = map[string]bool{
	"read": true, "read_image": true, "glob": true, "grep": true, "todo_write": true, "skill": true,
	"web_fetch": true, "web_search": true, "job_output": true, "job_list": true, "job_kill": true,
	"list_agents": true, "list_subagent_models": true, "mcp_list_resources": true, "mcp_read_resource": true,
	AskName: true, ExitName: true, "bash": true, "str_replace_based_edit_tool": true,
	// Read-only tools of the rest of the catalog (issue 18).
	"lsp": true, "session_search": true, "session_event_search": true, "session_event_read": true,
	"session_trace": true, "session_event_trace": true, "get_goal": true, "terminal_read": true, "terminal_list": true,
}

// Mode is one session's plan mode: the state folded from the log, a
// change waiting for the step boundary, the pre-execute refusal of
// writing tools, the runtime-context section and exit_plan_mode.
type Mode struct {
	log *session.Log
	// allow are extra tools allowed in plan mode (configuration).
	allow map[string]bool

	mu      sync.Mutex
	pending *PlanMode // guarded by mu; applied at the next step boundary
	busy    func() bool
	// applyMu orders appends of plan/mode so that two changes are
	// logged in the order they were taken.
	applyMu sync.Mutex
}

// NewMode returns the plan mode of log. extraAllowed names tools beyond
// the built-in read-only set that may run in plan mode.
func NewMode(log *session.Log, extraAllowed []string) *Mode {
	m := &Mode{log: log, allow: map[string]bool{}}
	for _, t := range extraAllowed {
		m.allow[t] = true
	}
	return m
}

// SetBusy tells the mode how to know whether a turn runs (the agent's
// Busy): while one does, changes wait for the step boundary.
func (m *Mode) SetBusy(busy func() bool) {
	m.mu.Lock()
	m.busy = busy
	m.mu.Unlock()
}

// Active reports whether plan mode is on (as logged).
func (m *Mode) Active() bool { return Active(m.log) }

// Set asks for plan mode on or off: logged now when no turn runs, else
// at the next step boundary (or when the run ends). Setting the mode it
// already has logs nothing.
func (m *Mode) Set(active bool, source string) error {
	m.mu.Lock()
	m.pending = &PlanMode{Active: active, Source: source}
	busy := m.busy
	m.mu.Unlock()
	// The change is pending before Busy is read: a run that ends after
	// this check applies it itself (Settle), one that ends before it is
	// seen idle here.
	if busy != nil && busy() {
		return nil
	}
	return m.Settle()
}

// Settle logs a pending change (a step boundary, the end of a run).
func (m *Mode) Settle() error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	p := m.pending
	m.pending = nil
	m.mu.Unlock()
	if p == nil || p.Active == m.Active() {
		return nil
	}
	_, err := m.log.Append(session.TypePlanMode, *p)
	return err
}

// PreStep is the pre-step hook: a change asked during the last step
// takes effect before the next one (the runtime-context snapshot, which
// enters after it, then tells the model).
func (m *Mode) PreStep(_ context.Context, in agent.PreStep) ([]llm.Message, bool, error) {
	return in.Messages, false, m.Settle()
}

// PreExecute refuses writing tools while plan mode is on with
// PLAN_MODE_ACTIVE: anything outside the read-only set, a
// str_replace_based_edit_tool command other than view, and a bash call
// asking for wider sandbox permissions. Other bash calls run, in the
// read-only sandbox.
func (m *Mode) PreExecute(ctx context.Context, c *tool.Call, next func(context.Context) tool.Decision) tool.Decision {
	if !m.Active() {
		return next(ctx)
	}
	if reason := m.refusal(c); reason != "" {
		return tool.Decision{Kind: tool.Deny, Reason: reason, Info: &tool.Error{Name: "PlanModeError", Code: CodePlanModeActive}}
	}
	return next(ctx)
}

func (m *Mode) refusal(c *tool.Call) string {
	const tail = " Plan mode is on: explore and plan only; present the plan with exit_plan_mode, and make changes once the user approves it."
	if !readOnlyTools[c.Name] && !m.allow[c.Name] {
		return fmt.Sprintf("%s is not available in plan mode: it can change things.", c.Name) + tail
	}
	var args map[string]json.RawMessage
	_ = json.Unmarshal(c.Arguments, &args)
	switch c.Name {
	case "str_replace_based_edit_tool":
		var cmd string
		if json.Unmarshal(args["command"], &cmd) != nil || cmd != "view" {
			return "str_replace_based_edit_tool may only view files in plan mode." + tail
		}
	case "bash":
		var perms string
		if json.Unmarshal(args["sandbox_permissions"], &perms) == nil && perms != "" {
			return "bash commands run in the read-only sandbox in plan mode and cannot ask for wider permissions." + tail
		}
	}
	return ""
}

// policyOn is the planning policy the model reads while plan mode is on.
const policyOn = "Plan mode is on: the user wants a plan before any change. Explore and think: read files, search, " +
	"and run read-only commands (bash runs in a read-only sandbox, so writes fail). Ask the user with ask_user_question " +
	"when a decision is theirs. Do not change anything: writing tools are refused with PLAN_MODE_ACTIVE. When the plan is " +
	"ready, call exit_plan_mode with it in markdown (a `# title`, the steps, the files to change, how you will verify). " +
	"The user approves it, and plan mode ends, or tells you what to change."

// policyOff tells the model plan mode ended (only in a session that had it).
const policyOff = "Plan mode is off: you may change files again; follow the plan the user approved, if any."

// RuntimeSection is the plan:policy runtime-context section. Mode changes
// reach the model as a new runtime-context snapshot (an appended
// message), never as a change of the system prompt or of the tool list,
// so the cached request prefix stays valid. A session that never had plan
// mode renders nothing.
func (m *Mode) RuntimeSection() prompt.RuntimeSection {
	return prompt.RuntimeSection{Name: SectionPlan, Order: 40, Render: func() string {
		switch {
		case m.Active():
			return policyOn
		case everActive(m.log):
			return policyOff
		}
		return ""
	}}
}

// NewExit returns the exit_plan_mode tool of mode m. It stays in the
// schema when plan mode is off and refuses calls then
// (PLAN_MODE_INACTIVE), so the tool list never changes with the mode.
func NewExit(m *Mode, o Options) tool.Definition {
	return tool.Definition{
		Name:        ExitName,
		Description: strings.TrimSpace(exitDescription),
		Parameters:  exitParameters,
		Timeout:     24 * time.Hour,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var args struct {
				Plan *string `json:"plan"`
			}
			dec := json.NewDecoder(strings.NewReader(string(c.Arguments)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&args); err != nil {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for exit_plan_mode: %s", plainJSONError(err))
			}
			if args.Plan == nil || strings.TrimSpace(*args.Plan) == "" {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for exit_plan_mode: plan is required and must not be empty")
			}
			plan := strings.TrimSpace(*args.Plan)
			if len(plan) > MaxPlan {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for exit_plan_mode: the plan is %d bytes; at most %d", len(plan), MaxPlan)
			}
			if !m.Active() {
				e := tool.Errorf(CodePlanModeInactive, "plan mode is off, so there is no plan to present: go ahead with the work (call exit_plan_mode only in plan mode).")
				e.Name = "PlanModeError"
				return tool.Result{}, e
			}
			ans, err := put(ctx, o, c, Request{CallID: c.ID, Kind: KindPlan, Plan: plan})
			if err != nil {
				return tool.Result{}, err
			}
			meta, _ := json.Marshal(map[string]any{"approved": *ans.Approve, "feedback": ans.Feedback})
			if !*ans.Approve {
				text := "The user did not approve the plan and wants you to keep planning (plan mode stays on)."
				if ans.Feedback != "" {
					text += " Their feedback: " + ans.Feedback
				}
				text += " Revise the plan, then present it again with exit_plan_mode."
				return tool.Result{Content: tool.Text(text).Content, Meta: meta}, nil
			}
			if err := m.Set(false, SourcePlanApproved); err != nil {
				return tool.Result{}, tool.Errorf(tool.CodeFailed, "the plan was approved but plan mode could not be ended: %v", err)
			}
			text := "The user approved the plan. Plan mode ends before your next step: carry out the plan now."
			if ans.Feedback != "" {
				text += " Their comment: " + ans.Feedback
			}
			return tool.Result{Content: tool.Text(text).Content, Meta: meta}, nil
		},
	}
}

var exitParameters = json.RawMessage(`{"type":"object","properties":{"plan":{"type":"string","minLength":1,` +
	`"description":"The plan in markdown: a # title, the steps, the files to change, how the result will be verified."}},` +
	`"required":["plan"],"additionalProperties":false}`)
