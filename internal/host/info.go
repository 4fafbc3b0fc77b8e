package host

import (
	"context"
	"fmt"
	"github.com/dsh-dev/dsh/internal/goal"
	"io"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// Status is a session's live status.
type Status string

// Live statuses.
const (
	StatusIdle             Status = "idle"
	StatusRunning          Status = "running"
	StatusAwaitingApproval Status = "awaiting-approval"
)

// ContextUse is a session's context pressure: how much of the model's
// window the next request is estimated to use.
type ContextUse struct {
	UsedTokens   int64   `json:"usedTokens"`
	WindowTokens int64   `json:"windowTokens"`
	Fraction     float64 `json:"fraction"`
}

// Info describes a session: its stored summary with the live overlay.
type Info struct {
	Header    session.Header `json:"header"`
	Title     string         `json:"title"`
	Status    Status         `json:"status"`
	Live      bool           `json:"live"`
	State     string         `json:"state"`
	Turns     int64          `json:"turns"`
	UpdatedAt int64          `json:"updatedAt"`
	LastSeq   int64          `json:"lastSeq"`
	Usage     llm.Usage      `json:"usage"`
	Context   *ContextUse    `json:"context,omitempty"`
	Pending   []Approval     `json:"pendingApprovals,omitempty"`
	// PendingQuestions are the live session's questions waiting for a
	// person.
	PendingQuestions []Question `json:"pendingQuestions,omitempty"`
	// PlanMode reports whether the session is in plan mode.
	PlanMode bool   `json:"planMode"`
	ParentID string `json:"parentId,omitempty"`
	Child    bool   `json:"child"`
	// Goal is the session's goal and whether its rounds are armed (Get
	// only; absent when the session never had one).
	Goal *goal.State `json:"goal,omitempty"`
}

// ListFilter selects sessions for List.
type ListFilter struct {
	// Cwd keeps sessions whose header cwd is exactly this directory.
	Cwd string
	// IncludeChildren lists subagent children and forks too.
	IncludeChildren bool
	// IDs, when not nil, keeps only these sessions (a page of a
	// workspace's members, say); listing order still applies.
	IDs []string
	// Limit keeps at most Limit sessions (0: all of them).
	Limit int
	// Before continues a listing after the page whose [Page.Next] it is
	// ("": from the newest session).
	Before string
}

// Page is one page of a listing.
type Page struct {
	// Sessions are newest first (by update time, then id).
	Sessions []Info
	// Next is the cursor of the following page (its [ListFilter.Before]);
	// "" when this page is the last.
	Next string
}

// JobInfo is one background job of a live session.
type JobInfo struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Command     string `json:"command"`
	Status      string `json:"status"`
	Summary     string `json:"summary"`
	StartedAt   int64  `json:"startedAt"`
	EndedAt     int64  `json:"endedAt,omitempty"`
	OutputBytes int64  `json:"outputBytes"`
}

// status computes e's live status.
func (h *Host) status(e *entry) Status {
	h.mu.Lock()
	waiting := false
	for _, p := range h.approvals {
		if p.SessionID == e.id {
			waiting = true
			break
		}
	}
	// A question waits for a person as an approval does: the session
	// reports awaiting-approval for both.
	for _, q := range h.questions {
		if waiting {
			break
		}
		waiting = q.SessionID == e.id
	}
	h.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case waiting:
		return StatusAwaitingApproval
	case e.inTurn:
		return StatusRunning
	}
	return StatusIdle
}

// statusChanged publishes e's status when it changed, and runs the idle
// timer only while it is idle.
func (h *Host) statusChanged(e *entry) {
	st := h.status(e)
	e.mu.Lock()
	changed := st != e.status
	e.status = st
	if st != StatusIdle && e.timer != nil {
		e.timer.Stop()
	}
	e.mu.Unlock()
	if st == StatusIdle {
		h.armIdle(e)
	}
	if changed {
		h.Publish(FeedEvent{Type: FeedSessionStatus, SessionID: e.id, Status: st})
	}
}

func infoOf(en store.Entry) Info {
	h := en.Header
	return Info{
		Header: h, Title: en.Title, Status: StatusIdle, State: en.Status, Turns: en.Turns,
		UpdatedAt: en.UpdatedAt, LastSeq: en.Events - 1, ParentID: h.ParentSession, Child: h.ParentSession != "",
	}
}

// overlay adds what only the live session knows.
func (h *Host) overlay(in *Info, e *entry, detail bool) {
	in.Live = true
	in.Status = h.status(e)
	in.Pending = h.Approvals(e.id)
	in.PendingQuestions = h.Questions(e.id)
	in.PlanMode = e.sess.PlanMode()
	// The stored summary says running for any leased session; the live
	// session knows better.
	e.mu.Lock()
	switch {
	case in.Status != StatusIdle:
		in.State = store.StatusRunning
	case e.lastEnd != "":
		in.State = e.lastEnd
	default:
		in.State = store.StatusNew
	}
	e.mu.Unlock()
	if n := int64(e.sess.Log.Len()); n-1 > in.LastSeq {
		in.LastSeq = n - 1
	}
	p := e.sess.Projections
	if u, _, ok := projection.GetAs[projection.TokenUsage](p, projection.KeyTokenUsage); ok {
		in.Usage = u.Total
	}
	if detail {
		if c, _, ok := projection.GetAs[projection.ContextPressure](p, projection.KeyContextPressure); ok {
			in.Context = &ContextUse{UsedTokens: c.EstimatedTokens, WindowTokens: c.ContextWindow, Fraction: c.Fraction}
		}
		if st, err := e.sess.Goals.State(); err == nil && st.Goal != nil {
			in.Goal = &st
		}
	}
}

// List returns the stored sessions (summaries; no log is read) with the
// live overlay, newest first: the page f selects, without its cursor.
func (h *Host) List(ctx context.Context, f ListFilter) ([]Info, error) {
	p, err := h.ListPage(ctx, f)
	return p.Sessions, err
}

// ListPage returns one page of the listing f selects: at most f.Limit
// sessions (all with 0) after the cursor f.Before, read from the store's
// listing index, and the cursor of the next page. A session whose header
// cannot be read is left out of the page but still moves the cursor on.
func (h *Host) ListPage(ctx context.Context, f ListFilter) (Page, error) {
	if f.Limit < 0 {
		return Page{}, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("limit %d is negative", f.Limit)}
	}
	sf := store.ListFilter{Cwd: f.Cwd, TopLevelOnly: !f.IncludeChildren, IDs: f.IDs}
	if f.Before != "" {
		c, err := store.ParseCursor(f.Before)
		if err != nil {
			return Page{}, &Error{Code: CodeInvalidArgument, Err: err}
		}
		sf.Before = &c
	}
	if f.Limit > 0 {
		// One more than the page tells whether another page follows.
		sf.Limit = f.Limit + 1
	}
	entries, err := h.app.Store.List(ctx, sf)
	if err != nil {
		return Page{}, classify(err)
	}
	var p Page
	if f.Limit > 0 && len(entries) > f.Limit {
		entries = entries[:f.Limit]
		p.Next = store.CursorOf(entries[f.Limit-1]).String()
	}
	p.Sessions = make([]Info, 0, len(entries))
	for _, en := range entries {
		if en.Err != nil {
			continue
		}
		in := infoOf(en)
		if e, _ := h.lookup(en.Header.ID); e != nil {
			h.overlay(&in, e, false)
		}
		p.Sessions = append(p.Sessions, in)
	}
	return p, nil
}

// Get describes session id (a unique prefix is enough), with its pending
// approvals, usage and context pressure. Usage and context of a session
// that is not live are folded from its stored log.
func (h *Host) Get(ctx context.Context, id string) (Info, error) {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return Info{}, err
	}
	return h.info(ctx, full)
}

// infoPage is how many events info folds at a time.
const infoPage = 1024

func (h *Host) info(ctx context.Context, id string) (Info, error) {
	return h.infoFolded(ctx, id, nil)
}

// infoFolded is info of a session that is not live; folded, when not
// nil, holds its whole log's projections (a session just disposed), so
// that the log is not read again.
func (h *Host) infoFolded(ctx context.Context, id string, folded *projection.Projections) (Info, error) {
	en, err := h.app.Store.Get(ctx, id)
	if err != nil {
		return Info{}, classify(err)
	}
	if en.Err != nil {
		return Info{}, classify(en.Err)
	}
	in := infoOf(en)
	if e, _ := h.lookup(id); e != nil {
		h.overlay(&in, e, true)
		return in, nil
	}
	if folded != nil {
		if u, _, ok := projection.GetAs[projection.TokenUsage](folded, projection.KeyTokenUsage); ok {
			in.Usage = u.Total
		}
		if c, _, ok := projection.GetAs[projection.ContextPressure](folded, projection.KeyContextPressure); ok && c.AnchorSeq >= 0 {
			in.Context = &ContextUse{UsedTokens: c.EstimatedTokens, WindowTokens: c.ContextWindow, Fraction: c.Fraction}
		}
		return in, nil
	}
	// The folds need one event at a time: read the log a page at a time
	// rather than hold a long session whole.
	usage, pressure := projection.TokenUsageUnit(), projection.ContextPressureUnit(0)
	us, ps := usage.Init(), pressure.Init()
	var x session.Expander
	// Plan mode and the goal are folds of a few rare events: keep those.
	var modes []session.Event
	for from := int64(0); ; {
		page, err := h.app.Store.ReadPage(ctx, id, from, infoPage)
		if err != nil {
			return Info{}, classify(err)
		}
		for _, ev := range page {
			if ev, err = x.Expand(ev); err != nil {
				return Info{}, classify(fmt.Errorf("session %s: %w: %w", id, store.ErrCorrupt, err))
			}
			us, ps = usage.Apply(us, ev), pressure.Apply(ps, ev)
			if ev.Type == session.TypePlanMode || ev.Type == session.TypeGoalChange {
				modes = append(modes, ev)
			}
		}
		if len(page) < infoPage {
			break
		}
		from += int64(len(page))
	}
	in.PlanMode = planModeOf(modes)
	if u, ok := us.(projection.TokenUsage); ok {
		in.Usage = u.Total
	}
	if c, ok := ps.(projection.ContextPressure); ok && c.AnchorSeq >= 0 {
		in.Context = &ContextUse{UsedTokens: c.EstimatedTokens, WindowTokens: c.ContextWindow, Fraction: c.Fraction}
	}
	// A stored session's goal is never armed: only a live one runs rounds.
	if g, err := goal.Fold(modes); err == nil && g != nil {
		in.Goal = &goal.State{Goal: g}
	}
	return in, nil
}

// Tree lists the subagent descendants of session id, pre-order, with a
// diagnostic for each branch that cannot be read.
func (h *Host) Tree(ctx context.Context, id string) ([]catalog.Row, error) {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := catalog.ListDescendants(ctx, h.app.CatalogDeps(), full)
	if err != nil {
		return nil, classify(err)
	}
	return rows, nil
}

// Export writes session id as JSONL, as `dsh sessions export` does; a
// live session is flushed first so the export holds everything logged.
func (h *Host) Export(ctx context.Context, id string, w io.Writer) error {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return err
	}
	if e, _ := h.lookup(full); e != nil {
		if err := e.sess.Log.Flush(ctx); err != nil {
			return classify(err)
		}
	}
	return classify(h.app.Store.Export(ctx, full, w))
}

// Jobs lists the background jobs of live session id (none for a session
// that is not live: its jobs ended with it).
func (h *Host) Jobs(id string) []JobInfo {
	e, _ := h.lookup(id)
	if e == nil {
		return nil
	}
	var out []JobInfo
	for _, j := range e.sess.Jobs() {
		out = append(out, jobInfo(j))
	}
	return out
}

func jobInfo(j jobs.Job) JobInfo {
	ji := JobInfo{ID: j.ID, Kind: j.Kind, Command: j.Description, Status: string(j.Status), Summary: j.Summary(),
		StartedAt: j.Started.UnixMilli(), OutputBytes: j.OutputBytes}
	if !j.Ended.IsZero() {
		ji.EndedAt = j.Ended.UnixMilli()
	}
	return ji
}

// unixMilli is the host's clock for approval times.
func unixMilli() int64 { return time.Now().UnixMilli() }
