// Package host is the session host: the one owner of the live sessions
// of a process. Drivers (dsh run, dsh serve's HTTP API, later the TUI and
// ACP) create, resume, deliver to, cancel, follow and close sessions only
// through a Host; the host wires each session through the composition
// root (internal/app), runs its agent from one owner goroutine
// (agent.Serve, woken by queued or steered input, children's settle
// notices and job notices), keeps the approvals its sessions ask in a
// queue any client can answer, publishes what changes on a feed, and
// disposes idle sessions, releasing their leases.
package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// DefaultIdleAfter is how long a live session stays open with nothing to
// do when Config.IdleAfter is 0.
const DefaultIdleAfter = 10 * time.Minute

// childStopTimeout bounds the wait for a disposed session's continuable
// children to settle.
const childStopTimeout = 10 * time.Second

// Config configures a Host.
type Config struct {
	// App is the opened composition root (store, profile). Required; the
	// host does not close it.
	App *app.App
	// Holder labels the leases the host takes ("dsh serve", "dsh run"),
	// for the SESSION_BUSY message another process gets.
	Holder string
	// IdleAfter disposes a live session that has been idle (no turn, no
	// pending input or approval, no running job or child) this long: 0
	// means DefaultIdleAfter, < 0 never.
	IdleAfter time.Duration
	// Human, when set, answers every approval the host's sessions ask
	// (dsh run's terminal) instead of the host's approval queue.
	Human permission.Answerer
	// Asker, when set, answers every question the host's sessions ask
	// (ask_user_question, exit_plan_mode: dsh run's terminal) instead of
	// the host's question queue.
	Asker question.Asker
	// Headless means no client will ever answer: sessions get neither the
	// approval nor the question queue, so an ask that no Human, reviewer
	// or hook decides is unavailable at once (dsh run without a
	// terminal), as with CreateRequest.Headless.
	Headless bool
}

// Host owns the live sessions of a process. Its methods are safe for
// concurrent use.
type Host struct {
	cfg  Config
	app  *app.App
	base context.Context
	stop context.CancelCauseFunc
	// wg counts every goroutine the host starts: owners, disposals,
	// idle timers' work.
	wg sync.WaitGroup

	mu        sync.Mutex
	closed    bool                        // guarded by mu
	live      map[string]*entry           // guarded by mu; by session id
	opening   map[string]chan struct{}    // guarded by mu; resumes in flight
	liveGen   chan struct{}               // guarded by mu; closed and replaced when live changes
	approvals map[string]*pending         // guarded by mu; by approval id
	questions map[string]*pendingQuestion // guarded by mu; by question id

	feeds feedHub
}

// entry is one live session.
type entry struct {
	id     string
	sess   *app.Session
	ctx    context.Context // the owner's; cancelled (with a cause) on dispose
	cancel context.CancelCauseFunc
	owned  chan struct{} // closed when the owner goroutine has ended
	done   chan struct{} // closed once disposed: log flushed, lease released

	mu        sync.Mutex
	inTurn    bool          // guarded by mu; between turn/start and turn/end
	lastEnd   string        // guarded by mu; reason kind of the last turn/end ("" before any)
	status    Status        // guarded by mu; last published
	last      agent.Outcome // guarded by mu; outcome of the last run
	ran       bool          // guarded by mu; a run ended since the last human message
	usage     llm.Usage     // guarded by mu; summed over runs since the last human message
	runEnded  chan struct{} // guarded by mu; closed and replaced when a run ends
	timer     *time.Timer   // guarded by mu; the idle timer
	disposing bool          // guarded by mu
	sending   int           // guarded by mu; Sends between their check and their delivery
	sendGen   uint64        // guarded by mu; counts Sends, so an idle check sees one that came and went
	failure   error         // guarded by mu; why the owner stopped on its own
	// unsettled is set at a turn/start and cleared once the owner has
	// handled the end of its run (runDone, after the goal driver), so
	// RunUntilIdle never takes the gap between the two for idleness.
	unsettled bool // guarded by mu

	// goalMu makes starting a goal round exclusive between the driver
	// (the owner goroutine) and a person's goal command.
	goalMu sync.Mutex
}

// New returns a host over cfg.App.
func New(cfg Config) (*Host, error) {
	if cfg.App == nil {
		return nil, errors.New("host: Config.App is required")
	}
	if cfg.Holder == "" {
		cfg.Holder = "dsh"
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = DefaultIdleAfter
	}
	base, stop := context.WithCancelCause(context.Background())
	return &Host{
		cfg: cfg, app: cfg.App, base: base, stop: stop,
		live: map[string]*entry{}, opening: map[string]chan struct{}{}, liveGen: make(chan struct{}),
		approvals: map[string]*pending{}, questions: map[string]*pendingQuestion{},
	}, nil
}

// App returns the composition root the host runs over.
func (h *Host) App() *app.App { return h.app }

// Close cancels running turns (cause "shutdown"), flushes every log,
// releases every lease and waits for every goroutine the host started.
// It is idempotent; every call after the first returns HOST_CLOSED
// errors from the other methods.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	entries := make([]*entry, 0, len(h.live))
	for _, e := range h.live {
		entries = append(entries, e)
	}
	h.mu.Unlock()
	var errs []error
	for _, e := range entries {
		if err := h.dispose(e, "shutdown"); err != nil {
			errs = append(errs, err)
		}
	}
	h.stop(errors.New("host closed"))
	waited := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("close host: %w", context.Cause(ctx)))
	}
	h.feeds.closeAll()
	return errors.Join(errs...)
}

// track counts work in progress that Close must wait for (an open, a
// disposal); it reports false once the host is closed. The caller calls
// h.wg.Done when the work ends.
func (h *Host) track() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	return true
}

// goTracked runs fn on a goroutine the host waits for in Close; it
// reports false (and runs nothing) once the host is closed.
func (h *Host) goTracked(fn func()) bool {
	if !h.track() {
		return false
	}
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}

// lookup returns the live entry of id and the channel closed at the next
// change of the live set.
func (h *Host) lookup(id string) (*entry, chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live[id], h.liveGen
}

// changedLocked wakes everyone waiting for a change of the live set.
func (h *Host) changedLocked() {
	close(h.liveGen)
	h.liveGen = make(chan struct{})
}

// resolve turns a unique id prefix into a full session id.
func (h *Host) resolve(ctx context.Context, id string) (string, error) {
	if id == "" {
		return "", errorf(CodeInvalidArgument, "a session id is required")
	}
	h.mu.Lock()
	_, ok := h.live[id]
	h.mu.Unlock()
	if ok {
		return id, nil
	}
	full, err := h.app.Store.Resolve(ctx, id)
	return full, classify(err)
}

// sessionOptions are the wiring choices of a session the host opens.
func (h *Host) sessionOptions(o app.SessionOptions, headless bool) (app.SessionOptions, *answerer) {
	o.Holder = h.cfg.Holder
	o.Human, o.Asker = h.cfg.Human, h.cfg.Asker
	if headless || h.cfg.Headless || (o.Human != nil && o.Asker != nil) {
		return o, nil
	}
	// The host's queues answer what the configured answerers do not.
	ans := &answerer{h: h}
	if o.Human == nil {
		o.Human = ans
	}
	if o.Asker == nil {
		o.Asker = ans
	}
	return o, ans
}

// ensureLive returns the live entry of session id (a full id), resuming
// it from the store when it is not live; o carries the choices of an
// explicit resume (model, permission…), empty for an on-demand one.
func (h *Host) ensureLive(ctx context.Context, id string, o app.SessionOptions) (*entry, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrHostClosed
		}
		if e := h.live[id]; e != nil {
			h.mu.Unlock()
			return e, nil
		}
		if wait := h.opening[id]; wait != nil {
			h.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		opened := make(chan struct{})
		h.opening[id] = opened
		h.wg.Add(1) // Close waits for the open; start refuses it once closed
		h.mu.Unlock()
		defer h.wg.Done()

		e, err := h.resume(ctx, id, o)
		h.mu.Lock()
		delete(h.opening, id)
		close(opened)
		h.mu.Unlock()
		return e, err
	}
}

// resume opens stored session id (taking its lease, repairing a log a
// killed holder left open) and starts its owner.
func (h *Host) resume(ctx context.Context, id string, o app.SessionOptions) (*entry, error) {
	o.ResumeID = id
	o, ans := h.sessionOptions(o, false)
	sess, err := h.app.OpenSession(ctx, o)
	if err != nil {
		return nil, classify(err)
	}
	return h.start(sess, ans)
}

// start registers an opened session and starts its owner goroutine.
// Input a resumed log left queued waits for the next wake (a Send), and
// then runs together with what that Send delivers.
func (h *Host) start(sess *app.Session, ans *answerer) (*entry, error) {
	id := sess.Log.ID()
	if ans != nil {
		ans.id = id
	}
	ctx, cancel := context.WithCancelCause(h.base)
	e := &entry{id: id, sess: sess, ctx: ctx, cancel: cancel, owned: make(chan struct{}), done: make(chan struct{}),
		status: StatusIdle, runEnded: make(chan struct{})}
	if ev, ok := sess.Log.Latest(session.TypeTurnEnd); ok {
		e.lastEnd = turnEndKind(ev)
	}
	sess.Log.Observe(func(ev session.Event) {
		switch ev.Type {
		case session.TypePlanMode:
			var p question.PlanMode
			if ev.Decode(&p) == nil {
				h.Publish(FeedEvent{Type: FeedPlanMode, SessionID: id, Active: &p.Active})
			}
			return
		case session.TypeTurnStart:
			e.mu.Lock()
			e.inTurn, e.unsettled = true, true
			e.mu.Unlock()
		case session.TypeTurnEnd:
			e.mu.Lock()
			e.inTurn, e.lastEnd = false, turnEndKind(ev)
			e.mu.Unlock()
		default:
			return
		}
		h.statusChanged(e)
	})
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		cancel(nil)
		sess.Close()
		return nil, ErrHostClosed
	}
	h.live[id] = e
	h.changedLocked()
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		h.own(e)
	}()
	h.armIdle(e)
	if h.subscribed() {
		if info, err := h.info(context.WithoutCancel(ctx), id); err == nil {
			h.Publish(FeedEvent{Type: FeedSessionAdded, SessionID: id, Status: StatusIdle, Info: &info})
		}
	}
	return e, nil
}

// own is the owner goroutine of a live session: it serves the agent
// until the session is disposed, or until a run fails to write the log,
// which disposes it.
func (h *Host) own(e *entry) {
	defer close(e.owned)
	err := e.sess.Agent.Serve(e.ctx, func(out agent.Outcome) {
		e.settlePlanMode()
		e.driveGoal(out) // before runDone, so RunUntilIdle sees a round it queues
		e.runDone(out)
	})
	if e.ctx.Err() != nil {
		return
	}
	e.mu.Lock()
	e.failure = err
	e.mu.Unlock()
	fmt.Fprintf(os.Stderr, "dsh: session %s stopped: %v\n", e.id, err)
	// dispose waits for this goroutine: it runs on its own.
	h.goTracked(func() { _ = h.dispose(e, "error") })
}

// turnEndKind is the reason kind of a turn/end event.
func turnEndKind(ev session.Event) string {
	var p session.TurnEnd
	if ev.Decode(&p) != nil {
		return ""
	}
	return p.Reason.Kind
}

// runDone records a finished run of the owner's agent.Serve.
func (e *entry) runDone(out agent.Outcome) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.usage.Add(out.Usage)
	e.last, e.ran, e.unsettled = out, true, false
	close(e.runEnded)
	e.runEnded = make(chan struct{})
}

// noteHuman starts a new run accounting: RunUntilIdle reports the usage
// of everything since the last human message.
func (e *entry) noteHuman() {
	e.mu.Lock()
	e.usage, e.ran = llm.Usage{}, false
	e.mu.Unlock()
	e.sess.NoteHumanTurn()
}

// dispose ends a live session: its running turn is cancelled with cause,
// its owner ends, its log is flushed and its lease released, and its
// pending approvals resolve as cancelled. Concurrent calls wait for the
// first.
func (h *Host) dispose(e *entry, cause string) error {
	e.mu.Lock()
	if e.disposing {
		e.mu.Unlock()
		<-e.done
		return nil
	}
	e.disposing = true
	if e.timer != nil {
		e.timer.Stop()
	}
	e.mu.Unlock()
	return h.finishDispose(e, cause)
}

// finishDispose is dispose once e is marked disposing.
func (h *Host) finishDispose(e *entry, cause string) error {
	e.cancel(&agent.CancelCause{Kind: cause})
	<-e.owned
	// Its continuable children stop too: nobody would take their notices.
	sctx, cancel := context.WithTimeout(context.Background(), childStopTimeout)
	if err := e.sess.StopChildren(sctx); err != nil {
		fmt.Fprintf(os.Stderr, "dsh: session %s: stop subagents: %v\n", e.id, err)
	}
	cancel()
	// Close settles the title call, cancels the session's jobs, flushes
	// and releases the lease.
	e.sess.Close()
	h.mu.Lock()
	if h.live[e.id] == e {
		delete(h.live, e.id)
		h.changedLocked()
	}
	h.mu.Unlock()
	close(e.done)
	if !h.subscribed() {
		return nil // the info would read the whole log, for nobody
	}
	ev := FeedEvent{Type: FeedSessionStatus, SessionID: e.id, Status: StatusIdle}
	// The session's projections folded its whole log, up to the last
	// event Close flushed: no need to read it back.
	if info, err := h.infoFolded(context.Background(), e.id, e.sess.Projections); err == nil {
		ev.Info = &info // no longer live
	}
	h.Publish(ev)
	return nil
}

// Dispose closes live session id now (as the idle timer would, but even
// when it is busy: a running turn is aborted with cause "disposed"). A
// session that is not live is left alone.
func (h *Host) Dispose(ctx context.Context, id string) error {
	full, err := h.resolve(ctx, id)
	if err != nil {
		return err
	}
	e, _ := h.lookup(full)
	if e == nil {
		return nil
	}
	return h.dispose(e, "disposed")
}

// armIdle (re)starts the idle timer of e when it is idle.
func (h *Host) armIdle(e *entry) {
	if h.cfg.IdleAfter < 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.disposing {
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timer = time.AfterFunc(h.cfg.IdleAfter, func() {
		if h.track() {
			defer h.wg.Done()
			h.idleCheck(e)
		}
	})
}

// idleCheck disposes e when it is still idle; otherwise the timer is
// re-armed for when it may be.
func (h *Host) idleCheck(e *entry) {
	e.mu.Lock()
	gen := e.sendGen
	e.mu.Unlock()
	nt, ns := e.sess.Agent.Pending()
	if h.status(e) != StatusIdle || e.sess.Agent.Busy() || nt+ns > 0 || !e.sess.Quiet() {
		h.armIdle(e)
		return
	}
	// A Send in flight, or one that came and went since the checks above,
	// keeps the session.
	e.mu.Lock()
	if e.disposing || e.inTurn || e.sending > 0 || e.sendGen != gen {
		e.mu.Unlock()
		h.armIdle(e)
		return
	}
	e.disposing = true
	e.mu.Unlock()
	_ = h.finishDispose(e, "disposed")
}

// deliverTo returns the live entry of session id, resumed if needed,
// marked as receiving a message so that it is not disposed as idle
// meanwhile; done must be called once the message is in its inbox.
func (h *Host) deliverTo(ctx context.Context, id string) (e *entry, done func(), err error) {
	for {
		if e, err = h.ensureLive(ctx, id, app.SessionOptions{}); err != nil {
			return nil, nil, err
		}
		e.mu.Lock()
		if !e.disposing {
			e.sending++
			e.sendGen++
			e.mu.Unlock()
			return e, func() {
				e.mu.Lock()
				e.sending--
				e.mu.Unlock()
			}, nil
		}
		e.mu.Unlock()
		// Being disposed: wait until it is, then open it again.
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
	}
}
