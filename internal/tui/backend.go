package tui

import (
	"context"
	"errors"
	"github.com/dsh-dev/dsh/internal/goal"
	"io"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// Backend is what the UI drives: the session host of this process
// ([NewHostBackend]) or a dsh serve host over its HTTP API
// ([NewAttachBackend]). Every method is a thin call of the host's API; the
// UI keeps no session state of its own beyond what the log says.
type Backend interface {
	// Open creates or resumes the session the UI starts with.
	Open(ctx context.Context, r OpenRequest) (host.Info, error)
	// Get describes a session (usage, context pressure).
	Get(ctx context.Context, id string) (host.Info, error)
	// Follow streams a session's events with seq > after.
	Follow(ctx context.Context, id string, after int64) (EventStream, error)
	// Feed subscribes to the host feed (approvals, status).
	Feed(ctx context.Context) (FeedStream, error)
	// Approvals lists the pending approvals of every session.
	Approvals(ctx context.Context) ([]host.Approval, error)
	// Send delivers a user message with its images.
	Send(ctx context.Context, id, text string, images []Image, d host.Delivery) error
	// Events reads every stored event of a session (a child's
	// transcript).
	Events(ctx context.Context, id string) ([]session.Event, error)
	// UpdateQueue steers (host.QueueSteer) or removes (host.QueueRemove)
	// a message waiting in the next-turn queue.
	UpdateQueue(ctx context.Context, id, messageID, op string) error
	// Cancel ends the running turn, keeping queued input.
	Cancel(ctx context.Context, id string) error
	// Answer answers a pending approval.
	Answer(ctx context.Context, id, approvalID string, a host.Answer) error
	// Questions lists the pending questions and plans of every session.
	Questions(ctx context.Context) ([]host.Question, error)
	// AnswerQuestion answers a pending question or plan.
	AnswerQuestion(ctx context.Context, id, questionID string, a host.QuestionAnswer) error
	// SetPlanMode puts a session in plan mode or takes it out.
	SetPlanMode(ctx context.Context, id string, active bool) error
	// Tree lists the subagent descendants of a session.
	Tree(ctx context.Context, id string) ([]catalog.Row, error)
	// List lists stored top-level sessions; cwd "" lists every directory's.
	List(ctx context.Context, cwd string) ([]host.Info, error)
	// Export writes a session as JSONL.
	Export(ctx context.Context, id string, w io.Writer) error
	// Jobs lists the background jobs of a live session.
	Jobs(ctx context.Context, id string) ([]host.JobInfo, error)
	// Reopen closes live session id and opens it again with other
	// choices (model, effort, permission); ErrUnsupported where the host
	// cannot (an attached server).
	Reopen(ctx context.Context, id string, r OpenRequest) (host.Info, error)
	// Compact summarises the history of idle session id.
	Compact(ctx context.Context, id string) (string, error)
	// Goal reads the session's goal; SetGoal carries out a person's goal
	// command (/goal).
	Goal(ctx context.Context, id string) (goal.State, error)
	SetGoal(ctx context.Context, id string, r host.GoalRequest) (goal.State, error)
	// Where says what the UI is connected to ("" in process).
	Where() string
	// DefaultModel is the provider/model a new session gets when none
	// is chosen ("" when unknown).
	DefaultModel(ctx context.Context) string
}

// ErrUnsupported is returned by a backend that cannot do what was asked.
var ErrUnsupported = errors.New("not available on this host")

// OpenRequest says which session to open and with what choices.
type OpenRequest struct {
	Cwd        string
	ResumeID   string
	Continue   bool
	Model      string
	Effort     string
	Permission string
}

// Image is a pasted image sent with a message.
type Image struct {
	MediaType string `json:"mediaType"`
	Data      string `json:"data"` // base64
}

// maxTranscriptEvents bounds what a read-only transcript loads.
const maxTranscriptEvents = 50_000

// EventStream is one followed session log.
type EventStream interface {
	Next(ctx context.Context) ([]session.Event, error)
	Close()
}

// FeedStream is one host feed subscription.
type FeedStream interface {
	Next(ctx context.Context) ([]host.FeedEvent, error)
	Close()
}

// hostBackend drives a host of this process.
type hostBackend struct {
	h *host.Host
}

// NewHostBackend returns the backend over an in-process host.
func NewHostBackend(h *host.Host) Backend { return &hostBackend{h: h} }

func (b *hostBackend) Where() string { return "" }

func (b *hostBackend) DefaultModel(context.Context) string { return b.h.App().DefaultModel() }

func (b *hostBackend) Open(ctx context.Context, r OpenRequest) (host.Info, error) {
	if r.ResumeID != "" || r.Continue {
		return b.h.Resume(ctx, host.ResumeRequest{ID: r.ResumeID, Continue: r.Continue, Cwd: r.Cwd,
			Model: r.Model, Effort: r.Effort, Permission: r.Permission})
	}
	return b.h.Create(ctx, host.CreateRequest{Cwd: r.Cwd, Model: r.Model, Effort: r.Effort, Permission: r.Permission})
}

func (b *hostBackend) Get(ctx context.Context, id string) (host.Info, error) { return b.h.Get(ctx, id) }

func (b *hostBackend) Follow(ctx context.Context, id string, after int64) (EventStream, error) {
	return b.h.Follow(ctx, id, after)
}

func (b *hostBackend) Feed(context.Context) (FeedStream, error) { return b.h.Subscribe(), nil }

func (b *hostBackend) Approvals(context.Context) ([]host.Approval, error) {
	return b.h.Approvals(""), nil
}

func (b *hostBackend) Send(ctx context.Context, id, text string, images []Image, d host.Delivery) error {
	m := agent.NewUserMessage(text)
	for _, im := range images {
		m.Content = append(m.Content, llm.Block{Type: llm.BlockImage, MediaType: im.MediaType, Data: im.Data})
	}
	return b.h.Send(ctx, id, m, d)
}

func (b *hostBackend) Events(ctx context.Context, id string) ([]session.Event, error) {
	var out []session.Event
	after := int64(-1)
	for len(out) < maxTranscriptEvents {
		page, next, err := b.h.Events(ctx, id, after, host.MaxEventsLimit)
		if err != nil {
			return out, err
		}
		if len(page) == 0 {
			break
		}
		out, after = append(out, page...), next
	}
	return out, nil
}

func (b *hostBackend) UpdateQueue(ctx context.Context, id, messageID, op string) error {
	return b.h.UpdateQueue(ctx, id, messageID, op)
}

func (b *hostBackend) Cancel(ctx context.Context, id string) error { return b.h.Cancel(ctx, id, false) }

func (b *hostBackend) Answer(ctx context.Context, id, approvalID string, a host.Answer) error {
	return b.h.Answer(ctx, id, approvalID, a)
}

func (b *hostBackend) Questions(context.Context) ([]host.Question, error) {
	return b.h.Questions(""), nil
}

func (b *hostBackend) AnswerQuestion(ctx context.Context, id, questionID string, a host.QuestionAnswer) error {
	return b.h.AnswerQuestion(ctx, id, questionID, a)
}

func (b *hostBackend) SetPlanMode(ctx context.Context, id string, active bool) error {
	return b.h.SetPlanMode(ctx, id, active)
}

func (b *hostBackend) Tree(ctx context.Context, id string) ([]catalog.Row, error) {
	return b.h.Tree(ctx, id)
}

func (b *hostBackend) List(ctx context.Context, cwd string) ([]host.Info, error) {
	return b.h.List(ctx, host.ListFilter{Cwd: cwd})
}

func (b *hostBackend) Export(ctx context.Context, id string, w io.Writer) error {
	return b.h.Export(ctx, id, w)
}

func (b *hostBackend) Jobs(_ context.Context, id string) ([]host.JobInfo, error) {
	return b.h.Jobs(id), nil
}

// Reopen disposes the live session (its lease is released, its log
// flushed) and resumes it with the new choices, which the resume logs as
// a request/header change: the host stays the only owner throughout.
func (b *hostBackend) Reopen(ctx context.Context, id string, r OpenRequest) (host.Info, error) {
	if err := b.h.Dispose(ctx, id); err != nil {
		return host.Info{}, err
	}
	r.ResumeID, r.Continue = id, false
	return b.Open(ctx, r)
}

func (b *hostBackend) Compact(ctx context.Context, id string) (string, error) {
	return compactLive(ctx, b.h, id)
}
