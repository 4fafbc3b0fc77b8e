// Package ralph is the ralph tool: a loop that starts one fresh
// structured child per round, through the subagent service, until a
// child reports the objective done or the round cap is reached.
//
// Each child gets only the objective and the round number; the
// workspace (files, commits, notes a child leaves) is the only memory
// the rounds share, so every round starts from a clean context. Every
// round is a standard one-shot delegation: its subagent/start and
// subagent/end (labelled "ralph round N/M") are in the caller's log, and
// its child is listed by `dsh sessions tree`. A ralph/round event after
// each round records what the child reported.
package ralph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Name is the tool's model-facing name.
const Name = "ralph"

// DefaultMaxRounds is the round cap when the call gives none.
const DefaultMaxRounds = 64

// DefaultTimeout bounds one whole ralph call.
const DefaultTimeout = 12 * time.Hour

// Error codes of a ralph call.
const (
	// CodeCapReached: no child reported the objective done within the cap.
	CodeCapReached = "RALPH_CAP_REACHED"
	// CodeRoundFailed: a round's child did not complete (an error, a
	// refusal, no structured report); the loop stops there.
	CodeRoundFailed = "RALPH_ROUND_FAILED"
)

// ReportSchema is what each round's child must report through
// structured_output.
var ReportSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"done":{"type":"boolean","description":"true only when the whole objective is achieved and verified in the workspace"},` +
	`"summary":{"type":"string","description":"what this round did and what remains"}` +
	`},"required":["done","summary"],"additionalProperties":false}`)

// Report is a child's structured report.
type Report struct {
	Done    bool   `json:"done"`
	Summary string `json:"summary"`
}

// Round is the payload of the ralph/round event logged in the caller's
// log after each round, and one entry of the tool's result.
type Round struct {
	CallID     string `json:"callId"`
	Round      int    `json:"round"`
	MaxRounds  int    `json:"maxRounds"`
	ChildID    string `json:"childId"`
	RunID      string `json:"runId"`
	StopReason string `json:"stopReason"`
	Done       bool   `json:"done"`
	Summary    string `json:"summary,omitempty"`
}

// Options configure the tool.
type Options struct {
	// Service starts the children. Required.
	Service *subagent.Service
	// Provider is the subagent provider of the children ("spawn").
	Provider string
	// ResolveLog maps a call to the caller's live log. Required.
	ResolveLog func(c *tool.Call) (*session.Log, error)
	// MaxRounds is the default cap (DefaultMaxRounds when 0).
	MaxRounds int
	// Timeout bounds the whole call (DefaultTimeout when 0).
	Timeout time.Duration
}

// New returns the ralph tool.
func New(o Options) (tool.Definition, error) {
	if o.Service == nil || o.ResolveLog == nil {
		return tool.Definition{}, errors.New("ralph: Service and ResolveLog are required")
	}
	if o.Provider == "" {
		o.Provider = "spawn"
	}
	if _, ok := o.Service.Provider(o.Provider); !ok {
		return tool.Definition{}, fmt.Errorf("ralph: subagent provider %q is not registered", o.Provider)
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = DefaultMaxRounds
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	params := fmt.Sprintf(`{"type":"object","properties":{`+
		`"objective":{"type":"string","description":"The objective, complete and self-contained: each round's subagent sees only this and the workspace."},`+
		`"maxRounds":{"type":"integer","minimum":1,"maximum":1000,"description":"At most this many rounds (default %d)."}`+
		`},"required":["objective"],"additionalProperties":false}`, o.MaxRounds)
	return tool.Definition{
		Name: Name,
		Description: "Pursue an objective with a loop of fresh subagents: each round starts a new subagent that sees only the objective " +
			"and the workspace (the files earlier rounds left are its only memory), works, and reports {done, summary}. " +
			"The loop ends when a subagent reports done, or after maxRounds rounds. Use it for long, mechanical objectives " +
			"that can be checked in the workspace (make the tests pass, port every file); the result lists each round's summary.",
		Parameters: json.RawMessage(params),
		Timeout:    o.Timeout,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			return run(ctx, o, c)
		},
	}, nil
}

func run(ctx context.Context, o Options, c *tool.Call) (tool.Result, error) {
	var a struct {
		Objective *string `json:"objective"`
		MaxRounds *int    `json:"maxRounds"`
	}
	dec := json.NewDecoder(strings.NewReader(string(c.Arguments)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if a.Objective == nil || strings.TrimSpace(*a.Objective) == "" {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "objective is required and must not be empty")
	}
	maxRounds := o.MaxRounds
	if a.MaxRounds != nil {
		if *a.MaxRounds < 1 || *a.MaxRounds > 1000 {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "maxRounds must be between 1 and 1000")
		}
		maxRounds = *a.MaxRounds
	}
	parent, err := o.ResolveLog(c)
	if err != nil {
		return tool.Result{}, fmt.Errorf("cannot find the calling session: %w", err)
	}
	objective := strings.TrimSpace(*a.Objective)
	var rounds []Round
	for n := 1; n <= maxRounds; n++ {
		if err := ctx.Err(); err != nil {
			return tool.Result{}, tool.Errorf(tool.CodeAborted, "ralph cancelled before round %d", n)
		}
		r, err := round(ctx, o, parent, c.ID, objective, n, maxRounds)
		if err != nil {
			return tool.Result{}, err
		}
		rounds = append(rounds, r)
		// Ignorable, like goal/change: the rounds' children and their
		// subagent events say the same to a build that does not know it.
		if _, err := parent.Append(session.TypeRalphRound, r, session.Ignorable()); err != nil {
			return tool.Result{}, fmt.Errorf("log ralph/round: %w", err)
		}
		if r.StopReason != subagent.StopCompleted {
			if ctx.Err() != nil {
				return failure(tool.CodeAborted, fmt.Sprintf("ralph cancelled during round %d", n), rounds)
			}
			return failure(CodeRoundFailed, fmt.Sprintf("round %d's subagent stopped (%s) without a report; the loop ended there", n, r.StopReason), rounds)
		}
		if r.Done {
			return success(fmt.Sprintf("Objective reported done in round %d of %d.", n, maxRounds), rounds)
		}
	}
	return failure(CodeCapReached, fmt.Sprintf("no round reported the objective done: all %d rounds ran", maxRounds), rounds)
}

// round runs one fresh child to its end.
func round(ctx context.Context, o Options, parent *session.Log, callID, objective string, n, maxRounds int) (Round, error) {
	prompt := fmt.Sprintf("You are round %d of at most %d of a loop working toward the objective below. "+
		"You start with no memory of earlier rounds: the workspace is the memory. Inspect it to see what earlier rounds did "+
		"(files, test results, notes they left), then do the next piece of work and check it. "+
		"Report done: true only when the whole objective is achieved and verified; otherwise report done: false "+
		"with a summary of what you did and what remains (leave notes in the workspace for the next round if useful).\n\nObjective: %s",
		n, maxRounds, objective)
	h, err := o.Service.Start(ctx, o.Provider, subagent.Request{
		Label: fmt.Sprintf("ralph round %d/%d", n, maxRounds), Prompt: []llm.Block{llm.TextBlock(prompt)},
		Parent: parent, OutputSchema: ReportSchema,
	})
	if err != nil {
		var se *subagent.Error
		if errors.As(err, &se) {
			return Round{}, &tool.Error{Name: "SubagentError", Code: se.Code, Message: se.Message}
		}
		return Round{}, err
	}
	// The run is bound to ctx: a cancelled call aborts the child, and the
	// wait ends with its aborted result.
	res, werr := h.Wait(context.WithoutCancel(ctx))
	derr := h.Dispose()
	if err := errors.Join(werr, derr); err != nil {
		return Round{}, fmt.Errorf("ralph round %d: %w", n, err)
	}
	r := Round{CallID: callID, Round: n, MaxRounds: maxRounds, ChildID: h.ChildID(), RunID: h.RunID(), StopReason: res.StopReason}
	if res.StopReason == subagent.StopCompleted {
		var rep Report
		if res.Structured == nil || json.Unmarshal(res.Structured, &rep) != nil {
			r.StopReason = subagent.StopError
			return r, nil
		}
		r.Done, r.Summary = rep.Done, rep.Summary
	}
	return r, nil
}

func render(head string, rounds []Round) string {
	var b strings.Builder
	b.WriteString(head)
	for _, r := range rounds {
		state := "not done"
		switch {
		case r.StopReason != subagent.StopCompleted:
			state = "stopped: " + r.StopReason
		case r.Done:
			state = "done"
		}
		fmt.Fprintf(&b, "\nRound %d (%s, session %s): %s", r.Round, state, r.ChildID, r.Summary)
	}
	return b.String()
}

func success(head string, rounds []Round) (tool.Result, error) {
	meta, _ := json.Marshal(map[string]any{"rounds": rounds, "done": true})
	return tool.Result{Content: []llm.Block{llm.TextBlock(render(head, rounds))}, Meta: meta}, nil
}

func failure(code, head string, rounds []Round) (tool.Result, error) {
	meta, _ := json.Marshal(map[string]any{"rounds": rounds, "done": false})
	text := "Error: " + render(head, rounds)
	return tool.Result{
		Content: []llm.Block{llm.TextBlock(text)}, IsError: true, Meta: meta,
		Error: &tool.Error{Name: "RalphError", Code: code, Message: text},
	}, nil
}
