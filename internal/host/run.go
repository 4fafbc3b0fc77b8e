package host

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// CreateRequest describes a new session; "" fields take the profile's
// defaults.
type CreateRequest struct {
	Cwd         string `json:"cwd"`
	Model       string `json:"model,omitempty"`
	Effort      string `json:"effort,omitempty"`
	Permission  string `json:"permission,omitempty"`
	Approval    string `json:"approval,omitempty"`
	AgentPreset string `json:"agentPreset,omitempty"`
	Title       string `json:"title,omitempty"`
	// MCPServers are MCP servers for this session only (an ACP client's
	// session/new), started with it and stopped with it.
	MCPServers []mcp.ServerConfig `json:"-"`
	// Origin marks a session an automation started (a schedule, a
	// webhook); it goes into the header. Drivers set it, clients cannot.
	Origin *Origin `json:"-"`
	// Headless opens the session without the host's approval and question
	// queues: nobody is there to answer, so an ask no reviewer or hook
	// decides is unavailable at once instead of waiting for a client
	// (automation), and a question fails with QUESTION_UNAVAILABLE.
	Headless bool `json:"-"`
	// PlanMode starts the session in plan mode (logged plan/mode before
	// the first turn).
	PlanMode bool `json:"planMode,omitempty"`
	// Restrictions hold a session started for hostile input (a review of
	// a pull request) to confined reads, a strict command environment and
	// a tool allow-list; logged as permission/restrictions before the
	// session is wired. Drivers set it, clients cannot.
	Restrictions permission.Restrictions `json:"-"`
}

// Origin is the kind and details of an automated session's origin.
type Origin struct {
	Kind string
	Info session.OriginInfo
}

// Create creates a new live session.
func (h *Host) Create(ctx context.Context, r CreateRequest) (Info, error) {
	if !h.track() {
		return Info{}, ErrHostClosed
	}
	defer h.wg.Done()
	o, ans := h.sessionOptions(app.SessionOptions{
		Cwd: r.Cwd, Model: r.Model, Effort: r.Effort, Permission: r.Permission, Approval: r.Approval, Preset: r.AgentPreset,
		MCPServers: r.MCPServers, Restrictions: r.Restrictions,
	}, r.Headless)
	if r.Origin != nil {
		info := r.Origin.Info
		o.Origin, o.OriginInfo = r.Origin.Kind, &info
	}
	sess, err := h.app.OpenSession(ctx, o)
	if err != nil {
		return Info{}, classify(err)
	}
	if t := session.PromptTitle(r.Title); t != "" {
		// A named session keeps its name: the title model is not asked.
		if _, err := sess.Log.Append(session.TypeTitle, session.Title{Title: t, Provider: "user"}, session.Ignorable()); err != nil {
			sess.Close()
			return Info{}, classify(err)
		}
		// Listings read the stored summary: make the name visible now.
		if err := sess.Log.Flush(ctx); err != nil {
			sess.Close()
			return Info{}, classify(err)
		}
	}
	e, err := h.start(sess, ans)
	if err != nil {
		return Info{}, err
	}
	if r.PlanMode {
		if err := h.SetPlanMode(ctx, e.id, true); err != nil {
			return Info{}, err
		}
	} else if session.PromptTitle(r.Title) == "" {
		// Nothing but the new row is stored yet, and all it holds is known
		// here: no store read (on a fresh process, a connection of its
		// own) between exec and the first request. The row's updated_at
		// is its creation, a moment after the header's.
		hdr := sess.Log.Header()
		in := infoOf(store.Entry{Header: hdr, Status: store.StatusNew, UpdatedAt: hdr.CreatedAt})
		h.overlay(&in, e, true)
		return in, nil
	}
	return h.info(ctx, e.id)
}

// ResumeRequest opens a stored session live with explicit choices, as
// `dsh run --resume`/`--continue` do; Send resumes on demand with the
// session's own.
type ResumeRequest struct {
	// ID is the session id or a unique prefix of it.
	ID string
	// Continue resumes the newest top-level session whose cwd is Cwd
	// (default: the current directory) when ID is "".
	Continue    bool
	Cwd         string
	Model       string
	Effort      string
	Permission  string
	Approval    string
	AgentPreset string
	// MCPServers are MCP servers for this session only while it is open
	// (ignored when it is already live).
	MCPServers []mcp.ServerConfig
	// PlanMode, when set, turns plan mode on or off (nil keeps the
	// session's).
	PlanMode *bool
}

// Resume opens a stored session live (taking its lease: SESSION_BUSY when
// another process holds it; a lease left by a killed process is taken over
// and its log repaired). A session already live here is returned as is.
func (h *Host) Resume(ctx context.Context, r ResumeRequest) (Info, error) {
	id := r.ID
	if id == "" && !r.Continue {
		return Info{}, errorf(CodeInvalidArgument, "a session id is required")
	}
	if id == "" {
		full, err := h.app.LatestSession(ctx, r.Cwd)
		if err != nil {
			return Info{}, classify(err)
		}
		id = full
	}
	full, err := h.resolve(ctx, id)
	if err != nil {
		return Info{}, err
	}
	e, err := h.ensureLive(ctx, full, app.SessionOptions{
		Model: r.Model, Effort: r.Effort, Permission: r.Permission, Approval: r.Approval, Preset: r.AgentPreset,
		MCPServers: r.MCPServers,
	})
	if err != nil {
		return Info{}, err
	}
	if r.PlanMode != nil {
		if err := h.SetPlanMode(ctx, e.id, *r.PlanMode); err != nil {
			return Info{}, err
		}
	}
	return h.info(ctx, e.id)
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Delivery says when a sent message enters the conversation.
type Delivery string

// Deliveries.
const (
	// DeliveryQueue: at the next turn (the default).
	DeliveryQueue Delivery = "queue"
	// DeliverySteer: at the next step of the running turn.
	DeliverySteer Delivery = "steer"
)

// Send delivers a user message to session id: a stored session is
// resumed on demand, an idle agent starts a turn. It returns once the
// message is logged in the inbox and stored.
func (h *Host) Send(ctx context.Context, id string, msg llm.Message, d Delivery) error {
	switch d {
	case "", DeliveryQueue, DeliverySteer:
	default:
		return errorf(CodeInvalidArgument, "delivery %q: want %q or %q", d, DeliveryQueue, DeliverySteer)
	}
	if blank(msg) {
		return errorf(CodeInvalidArgument, "the message is empty")
	}
	if msg.Role == "" {
		msg.Role = llm.RoleUser
	}
	if msg.Role != llm.RoleUser {
		return errorf(CodeInvalidArgument, "a sent message has role user, not %q", msg.Role)
	}
	if msg.ID == "" {
		msg.ID = newID()
	}
	full, err := h.resolve(ctx, id)
	if err != nil {
		return err
	}
	if e, _ := h.lookup(full); e == nil {
		// A subagent child is driven by its parent's session (the
		// subagent manager writes it); clients read it. An explicit
		// Resume (dsh run --resume) may still open one.
		hd, err := h.app.Store.Header(ctx, full)
		if err != nil {
			return classify(err)
		}
		if hd.Origin == subagent.OriginSubagent {
			return errorf(CodeInvalidArgument, "session %s is a subagent child: its parent's session drives it (send_message), clients only read it", full)
		}
	}
	e, done, err := h.deliverTo(ctx, full)
	if err != nil {
		return err
	}
	defer done()
	e.noteHuman()
	if d == DeliverySteer {
		err = e.sess.Agent.Steer(msg)
	} else {
		err = e.sess.Agent.Queue(msg)
	}
	if err != nil {
		return classify(err)
	}
	// Accepted means stored: a crash right after loses no message.
	return classify(e.sess.Log.Flush(ctx))
}

// blank reports whether msg has nothing but blank text.
func blank(msg llm.Message) bool {
	for _, b := range msg.Content {
		if b.Type != llm.BlockText || strings.TrimSpace(b.Text) != "" {
			return false
		}
	}
	return true
}

// Cancel ends the running turn of session id (turn/end aborted, cause
// "user"); its pending approvals resolve as cancelled. Queued input stays
// unless clearQueue. A session that is not live has nothing to cancel.
func (h *Host) Cancel(ctx context.Context, id string, clearQueue bool) error {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return err
	}
	e, _ := h.lookup(full)
	if e == nil {
		return nil
	}
	return classify(e.sess.Agent.Cancel("user", !clearQueue))
}

// Log returns the live log of session id, for a driver that renders it
// as it grows (dsh run's progress and --json stream).
func (h *Host) Log(id string) (*session.Log, bool) {
	e, _ := h.lookup(id)
	if e == nil {
		return nil, false
	}
	return e.sess.Log, true
}

// MCPServer returns the MCP server name as live session id sees it (the
// profile's servers and the session's own), for a driver that renders an
// MCP prompt into the session's first message.
func (h *Host) MCPServer(id, name string) (*mcp.Server, bool) {
	e, _ := h.lookup(id)
	if e == nil {
		return nil, false
	}
	return e.sess.MCPServer(name)
}

// SettleTitle waits briefly for a session-title call of live session id
// still in flight, so that its event is logged before a driver stops
// reading.
func (h *Host) SettleTitle(ctx context.Context, id string) {
	if e, _ := h.lookup(id); e != nil {
		e.sess.SettleTitle(ctx)
	}
}

// RunUntilIdle is dsh run's policy: it waits while session id runs, lets
// its continuable children settle (their notices start new turns), waits
// for its background jobs (their notices too), until the agent is idle
// with nothing pending and nothing at work. It returns the outcome of the
// last run since the last human message, with the usage of all of them.
// When ctx ends, the running turn is cancelled (cause "user", queued input
// kept) and RunUntilIdle returns once it has ended.
func (h *Host) RunUntilIdle(ctx context.Context, id string) (agent.Outcome, error) {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return agent.Outcome{}, err
	}
	e, _ := h.lookup(full)
	if e == nil {
		return agent.Outcome{}, errorf(CodeInvalidArgument, "session %s is not live", full)
	}
	stop := context.AfterFunc(ctx, func() { _ = e.sess.Agent.Cancel("user", true) })
	defer stop()
	ag := e.sess.Agent
	for {
		e.mu.Lock()
		ended := e.runEnded
		failure := e.failure
		unsettled := e.unsettled
		e.mu.Unlock()
		if failure != nil {
			return e.outcome(), failure
		}
		select {
		case <-e.done:
			return e.outcome(), ErrHostClosed
		default:
		}
		// A run that has ended but whose end the owner has not handled yet
		// (the goal driver may queue a round) is still busy.
		busy := ag.Busy() || unsettled
		nt, ns := ag.Pending()
		switch {
		case busy:
		case nt+ns > 0 && ctx.Err() == nil:
			// A run that stopped on an aborted or failed turn leaves
			// later input queued; Serve runs it on a wake.
			ag.Wake()
		case ctx.Err() != nil:
			return e.outcome(), nil
		default:
			if err := e.sess.Drain(ctx); err != nil {
				continue // ctx ended: the next round returns
			}
			if nt, ns := ag.Pending(); nt+ns > 0 || ag.Busy() {
				continue // a settle notice woke it
			}
			woken, err := e.sess.WaitJobs(ctx)
			if err != nil {
				continue
			}
			if !woken {
				if nt, ns := ag.Pending(); nt+ns == 0 && !ag.Busy() {
					return e.outcome(), nil
				}
			}
			continue
		}
		select {
		case <-ended:
		case <-e.done:
		case <-ctx.Done():
			// The cancel above ends the turn; wait for its run to end.
			select {
			case <-ended:
			case <-e.done:
			}
		}
	}
}

// outcome is the last run's outcome with the usage of every run since the
// last human message.
func (e *entry) outcome() agent.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.ran {
		return agent.Outcome{Reason: session.TurnEndReason{Kind: session.EndCompleted}, Usage: e.usage}
	}
	out := e.last
	out.Usage = e.usage
	return out
}

// Fork creates a new session seeded with session id's events up to its
// last turn/end (never the in-flight turn), opened live and idle. Input
// the parent had queued for later turns is not carried over.
func (h *Host) Fork(ctx context.Context, id string) (Info, error) {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return Info{}, err
	}
	var events []session.Event
	if e, _ := h.lookup(full); e != nil {
		if events, err = e.sess.Log.Read(ctx, 0, -1); err != nil {
			return Info{}, classify(err)
		}
	} else if events, err = h.app.Store.ReadFrom(ctx, full, 0); err != nil {
		return Info{}, classify(err)
	}
	ph, err := h.app.Store.Header(ctx, full)
	if err != nil {
		return Info{}, classify(err)
	}
	seed := subagent.ForkSeed(events)
	n := int64(len(seed))
	hd := session.Header{
		Version: session.FormatVersion, ID: newID(), CreatedAt: time.Now().UnixMilli(), Cwd: ph.Cwd,
		ParentSession: full, SeedLength: &n, Origin: "fork", DelegationDepth: ph.DelegationDepth, AgentPreset: ph.AgentPreset,
	}
	if err := h.app.Store.Create(ctx, hd); err != nil {
		return Info{}, classify(err)
	}
	if len(seed) > 0 {
		if err := h.app.Store.Append(ctx, hd.ID, seed); err != nil {
			return Info{}, classify(err)
		}
	}
	// The parent's queued input is not the fork's: it is cleared, not run.
	e, err := h.ensureLive(ctx, hd.ID, app.SessionOptions{})
	if err != nil {
		return Info{}, err
	}
	if nt, ns := e.sess.Agent.Pending(); nt+ns > 0 {
		if err := e.sess.Agent.Cancel("user", false); err != nil {
			return Info{}, classify(err)
		}
	}
	// Plan mode set while the parent was idle comes after its last
	// turn/end, outside the seed: the fork takes the parent's mode.
	if on := planModeOf(events); on != planModeOf(seed) {
		if err := e.sess.SetPlanMode(on, question.SourceUser); err != nil {
			return Info{}, classify(err)
		}
	}
	return h.info(ctx, hd.ID)
}

func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
