package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"time"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/rpc"
	"github.com/dsh-dev/dsh/internal/session"
)

// SessionOptions choose a new session; "" takes the profile's defaults.
type SessionOptions struct {
	// Cwd is the session's working directory (absolute). Required.
	Cwd string
	// Model is "provider/model".
	Model  string
	Effort string
	// Permission is a preset: read-only, workspace-write, auto,
	// full-access.
	Permission  string
	AgentPreset string
	// Title names the session (otherwise its first prompt does).
	Title string
}

// Session is a session of the client.
type Session struct {
	ID  string
	Cwd string
	c   *Client
}

// Create creates a new session.
func (c *Client) Create(ctx context.Context, o SessionOptions) (*Session, error) {
	if !filepath.IsAbs(o.Cwd) {
		return nil, &Error{Code: host.CodeInvalidArgument, Err: fmt.Errorf("sdk: Cwd %q: an absolute directory is required", o.Cwd)}
	}
	info, err := c.h.Create(ctx, host.CreateRequest{Cwd: o.Cwd, Model: o.Model, Effort: o.Effort,
		Permission: o.Permission, AgentPreset: o.AgentPreset, Title: o.Title})
	if err != nil {
		return nil, wrap(err)
	}
	return &Session{ID: info.Header.ID, Cwd: info.Header.Cwd, c: c}, nil
}

// Resume opens a stored session (a unique id prefix is enough).
func (c *Client) Resume(ctx context.Context, id string) (*Session, error) {
	info, err := c.h.Resume(ctx, host.ResumeRequest{ID: id})
	if err != nil {
		return nil, wrap(err)
	}
	return &Session{ID: info.Header.ID, Cwd: info.Header.Cwd, c: c}, nil
}

// SessionInfo summarises a stored session.
type SessionInfo struct {
	ID        string
	Cwd       string
	Title     string
	Turns     int64
	UpdatedAt time.Time
	// Status is idle, running or awaiting-approval.
	Status string
}

// Sessions lists the top-level sessions whose working directory is cwd
// ("" for all), newest first.
func (c *Client) Sessions(ctx context.Context, cwd string) ([]SessionInfo, error) {
	list, err := c.h.List(ctx, host.ListFilter{Cwd: cwd})
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]SessionInfo, 0, len(list))
	for _, in := range list {
		out = append(out, SessionInfo{ID: in.Header.ID, Cwd: in.Header.Cwd, Title: in.Title, Turns: in.Turns,
			UpdatedAt: time.UnixMilli(in.UpdatedAt), Status: string(in.Status)})
	}
	return out, nil
}

// Usage counts tokens; InputTokens excludes the cached ones.
type Usage struct {
	InputTokens, CacheReadTokens, CacheWriteTokens, OutputTokens int64
}

// Result is how a prompted turn ended.
type Result struct {
	// Status is completed, aborted, error, max-tokens, blocked or
	// interrupted.
	Status string
	// Cause says why an aborted turn was (user, disposed, shutdown).
	Cause string
	// Text is the turn's final answer.
	Text  string
	Usage Usage
	// FailureCode is dsh's stable model-failure code of an error turn
	// (AUTH, RATE_LIMIT, …); FailureMessage says more.
	FailureCode, FailureMessage string
}

// Prompt sends text and waits until the turn that takes it ends. When
// ctx ends first, the session's running turn is cancelled (and its queued
// input dropped) and Prompt returns ctx's error.
func (s *Session) Prompt(ctx context.Context, text string) (Result, error) {
	msg := llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}}
	res, err := rpc.Prompt(ctx, s.c.h, s.ID, msg)
	if err != nil {
		if ctx.Err() != nil {
			_ = s.c.h.Cancel(context.WithoutCancel(ctx), s.ID, true)
			return Result{}, context.Cause(ctx)
		}
		return Result{}, wrap(err)
	}
	r := Result{Status: res.Status, Cause: res.Cause, Text: res.Text, Usage: Usage{
		InputTokens: res.Usage.InputTokens, CacheReadTokens: res.Usage.CacheReadTokens,
		CacheWriteTokens: res.Usage.CacheWriteTokens, OutputTokens: res.Usage.OutputTokens}}
	if f := res.Failure; f != nil {
		r.FailureCode, r.FailureMessage = string(f.Code), f.Message
	}
	return r, nil
}

// Cancel ends the running turn (aborted, cause user).
func (s *Session) Cancel(ctx context.Context) error {
	return wrap(s.c.h.Cancel(ctx, s.ID, false))
}

// Event is one session log event.
type Event struct {
	Seq  int64
	Type string
	Time time.Time
	// Data is the event's payload as logged (see `dsh sessions export`).
	Data json.RawMessage
}

// TextDelta is the answer text an assistant/chunk event streams, "" for
// any other event.
func (e Event) TextDelta() string {
	if e.Type != session.TypeAssistantChunk {
		return ""
	}
	var p session.AssistantChunk
	if json.Unmarshal(e.Data, &p) != nil || p.Chunk.Type != llm.ChunkTextDelta {
		return ""
	}
	return p.Chunk.Text
}

// Events yields the session's events with seq > after (-1: from the
// start), stored then live as they are appended, until ctx ends (the
// sequence then ends with ctx's error) or the loop stops.
func (s *Session) Events(ctx context.Context, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		st, err := s.c.h.Follow(ctx, s.ID, after)
		if err != nil {
			yield(Event{}, wrap(err))
			return
		}
		defer st.Close()
		for {
			events, err := st.Next(ctx)
			if err != nil {
				yield(Event{}, err)
				return
			}
			for _, e := range events {
				if !yield(Event{Seq: e.Seq, Type: e.Type, Time: time.UnixMilli(e.Time), Data: e.Data}, nil) {
					return
				}
			}
		}
	}
}
