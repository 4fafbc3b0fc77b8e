// Package sdk embeds dsh in a Go program: open a session host on a dsh
// home, create or resume sessions, prompt them and stream their events,
// answer approvals with a callback, and give the agent extra tools that
// run through the same pipeline as the built-in ones (permission rules,
// approvals, hooks, logging).
//
// A Client is the one owner of its sessions while it is open, as `dsh
// serve` or `dsh run` would be: it holds their leases (another process
// gets SESSION_BUSY), and Close cancels running turns, flushes the logs
// and releases the leases. Sessions are ordinary dsh sessions: `dsh
// sessions list` shows them and `dsh run --resume` continues them once
// the client is closed.
//
// Configuration comes from the home's config.yaml and the environment
// exactly as for the dsh command (providers, API keys, profile).
package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// Options configure a Client.
type Options struct {
	// Home is the dsh home (sessions database, config.yaml); "" uses
	// $DSH_HOME, else ~/.dsh.
	Home string
	// Tools are offered to the model in every session the client opens,
	// beside the profile's tools.
	Tools []Tool
	// Approve answers every approval a session asks (a command escalating
	// out of the sandbox, a call a permission rule marks "ask"). It runs
	// on its own goroutine per approval; its context ends when the
	// approval is resolved otherwise (the turn was cancelled). Nil leaves
	// approvals pending until Client.Answer.
	Approve func(ctx context.Context, a Approval) Decision
	// Holder labels the client's session leases, for the message another
	// process gets when it tries to open one ("" is "dsh sdk").
	Holder string
}

// Tool is an extra tool.
type Tool struct {
	// Name is what the model calls it ([a-zA-Z0-9_-], at most 64).
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Run executes a call. Its text result goes to the model; an error
	// becomes a failed call whose message the model sees.
	Run func(ctx context.Context, args json.RawMessage) (string, error)
}

// Approval is a tool call waiting for a decision.
type Approval struct {
	ID        string
	SessionID string
	Tool      string
	CallID    string
	Reason    string
	Command   string
	Arguments json.RawMessage
}

// Decision answers an approval: Allow runs the call once; otherwise it is
// rejected and Feedback (optional) tells the model why.
type Decision struct {
	Allow    bool
	Feedback string
}

// Client is an open dsh host. Its methods are safe for concurrent use.
type Client struct {
	a       *app.App
	h       *host.Host
	approve func(ctx context.Context, a Approval) Decision

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Open opens the home's store and a session host over it.
func Open(ctx context.Context, o Options) (*Client, error) {
	defs := make([]tool.Definition, 0, len(o.Tools))
	for _, t := range o.Tools {
		if t.Run == nil {
			return nil, fmt.Errorf("sdk: tool %q has no Run", t.Name)
		}
		defs = append(defs, definition(t))
	}
	a, err := app.Open(ctx, app.Options{Home: o.Home, Tools: defs})
	if err != nil {
		return nil, fmt.Errorf("sdk: open: %w", err)
	}
	if o.Holder == "" {
		o.Holder = "dsh sdk"
	}
	// The SDK has no way to answer ask_user_question or exit_plan_mode
	// yet: they fail at once (QUESTION_UNAVAILABLE) instead of waiting
	// for an answer nobody can give.
	h, err := host.New(host.Config{App: a, Holder: o.Holder, Asker: noAsker{}})
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	cctx, stop := context.WithCancel(context.Background())
	c := &Client{a: a, h: h, approve: o.Approve, ctx: cctx, stop: stop}
	if o.Approve != nil {
		feed := h.Subscribe()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer feed.Close()
			c.approvals(feed)
		}()
	}
	return c, nil
}

// definition wraps an SDK tool as a pipeline tool.
func definition(t Tool) tool.Definition {
	return tool.Definition{
		Name: t.Name, Description: t.Description, Parameters: t.Parameters,
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			out, err := t.Run(ctx, c.Arguments)
			if err != nil {
				return tool.Result{}, err
			}
			return tool.Result{Content: []llm.Block{llm.TextBlock(out)}}, nil
		},
	}
}

// Close cancels running turns, flushes every log, releases every lease
// and closes the store. It waits for the client's goroutines, the
// approval callbacks included, until ctx ends.
func (c *Client) Close(ctx context.Context) error {
	err := c.h.Close(ctx)
	c.stop()
	c.wg.Wait()
	return errors.Join(err, c.a.Close())
}

// approvals runs the Approve callback for every pending approval.
func (c *Client) approvals(feed *host.Feed) {
	asking := map[string]context.CancelFunc{}
	defer func() {
		for _, cancel := range asking {
			cancel()
		}
	}()
	for {
		events, err := feed.Next(c.ctx)
		if errors.Is(err, host.ErrFeedOverflow) {
			feed = c.h.Subscribe()
			defer feed.Close()
			for _, a := range c.h.Approvals("") {
				c.ask(asking, a)
			}
			continue
		}
		if err != nil {
			return
		}
		for _, e := range events {
			switch e.Type {
			case host.FeedApprovalPending:
				if e.Approval != nil {
					c.ask(asking, *e.Approval)
				}
			case host.FeedApprovalResolved:
				if cancel := asking[e.ApprovalID]; cancel != nil {
					cancel()
					delete(asking, e.ApprovalID)
				}
			}
		}
	}
}

func (c *Client) ask(asking map[string]context.CancelFunc, a host.Approval) {
	if _, dup := asking[a.ID]; dup {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	asking[a.ID] = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		d := c.approve(ctx, Approval{ID: a.ID, SessionID: a.SessionID, Tool: a.ToolName, CallID: a.CallID,
			Reason: a.Reason, Command: a.Command, Arguments: a.Arguments})
		if ctx.Err() != nil {
			return
		}
		_ = c.Answer(ctx, a.SessionID, a.ID, d)
	}()
}

// Answer decides a pending approval (the first answer wins).
func (c *Client) Answer(ctx context.Context, sessionID, approvalID string, d Decision) error {
	ans := host.Answer{Decision: host.DecisionReject, Feedback: d.Feedback}
	if d.Allow {
		ans = host.Answer{Decision: host.DecisionAllowOnce}
	}
	return wrap(c.h.Answer(ctx, sessionID, approvalID, ans))
}

// Error is a dsh error with a stable code (SESSION_NOT_FOUND,
// SESSION_BUSY, INVALID_ARGUMENT, APPROVAL_NOT_PENDING, …).
type Error struct {
	Code string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: host.ErrorCode(err), Err: err}
}

// noAsker answers no question: the model is told nobody is available.
type noAsker struct{}

func (noAsker) Ask(context.Context, question.Request) (question.Answer, error) {
	return question.Answer{}, question.ErrUnavailable
}
