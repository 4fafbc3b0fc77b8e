package app

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
)

// jobHub is the process-wide background job registry and the delivery
// of completion notices to the live agents that own the jobs.
type jobHub struct {
	reg      *jobs.Registry
	notifier *jobs.Notifier

	mu     sync.Mutex
	agents map[string]*agent.Agent       // guarded by mu; live sessions by id
	done   map[string]chan jobs.Delivery // guarded by mu; per-owner delivery feed
}

func newJobHub() *jobHub {
	h := &jobHub{reg: jobs.New(jobs.Options{}), agents: map[string]*agent.Agent{}, done: map[string]chan jobs.Delivery{}}
	h.notifier = &jobs.Notifier{Jobs: h.reg, Owner: h.owner}
	h.reg.OnDone(func(j jobs.Job) {
		d, _ := h.notifier.Deliver(j)
		h.mu.Lock()
		ch := h.done[j.Owner]
		h.mu.Unlock()
		if ch != nil {
			select {
			case ch <- d:
			default: // nobody is waiting; the notice is already in the inbox
			}
		}
	})
	return h
}

// agentOwner adapts an agent to the notifier: Wake steers (starting a
// turn for an idle agent), Inject waits for the next step.
type agentOwner struct{ a *agent.Agent }

func (o agentOwner) Busy() bool                 { return o.a.Busy() }
func (o agentOwner) Inject(m llm.Message) error { return o.a.Inject(m) }
func (o agentOwner) Wake(m llm.Message) error   { return o.a.Steer(m) }

func (h *jobHub) owner(id string) jobs.Owner {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.agents[id]; a != nil {
		return agentOwner{a}
	}
	return nil
}

func (h *jobHub) attach(id string, a *agent.Agent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.agents[id] = a
	h.done[id] = make(chan jobs.Delivery, 16)
}

// detach disposes of a session's ownership: its jobs are cancelled.
func (h *jobHub) detach(id string) {
	h.mu.Lock()
	delete(h.agents, id)
	delete(h.done, id)
	h.mu.Unlock()
	h.reg.CancelOwner(id)
	h.notifier.Forget(id)
}

// running reports whether id owns a job that has not ended.
func (h *jobHub) running(id string) bool {
	for _, j := range h.reg.List(id) {
		if !j.Status.Terminal() {
			return true
		}
	}
	return false
}

// WaitJobs blocks until one of the session's background jobs ends with a
// completion notice that woke the agent (so the caller should run it
// again), or until the session owns no running job. It returns false at
// once when the session owns no running job.
//
// A notice that did not wake the agent (injected into a busy agent's
// next step, or skipped because it was already reported) does not end
// the wait while other jobs still run: such deliveries are also buffered
// while the agent runs, and returning on one would end a headless run
// early and cancel the jobs still running.
func (s *Session) WaitJobs(ctx context.Context) (woken bool, err error) {
	h := s.jobs
	id := s.Log.ID()
	h.mu.Lock()
	ch := h.done[id]
	h.mu.Unlock()
	for ch != nil {
		if !h.running(id) {
			// Drain the deliveries that raced with the last job's end.
			for {
				select {
				case d := <-ch:
					woken = woken || d == jobs.Woken
					continue
				default:
				}
				return woken, nil
			}
		}
		select {
		case d := <-ch:
			if d == jobs.Woken {
				return true, nil
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return false, nil
}

// Jobs returns the session's background jobs, newest last.
func (s *Session) Jobs() []jobs.Job { return s.jobs.reg.List(s.Log.ID()) }

// Quiet reports whether nothing the session started is still at work: no
// background job runs and no continuable child has a live activation.
// An idle agent whose session is quiet may be disposed.
func (s *Session) Quiet() bool {
	if s.jobs.running(s.Log.ID()) {
		return false
	}
	return s.manager == nil || !s.manager.Busy(s.Log.ID())
}

// NoteHumanTurn resets the self-woken turn count of the session's
// background job notices.
func (s *Session) NoteHumanTurn() { s.jobs.notifier.NoteHumanTurn(s.Log.ID()) }

// Close releases the session: its background jobs are cancelled and its
// terminals closed, its log
// is no longer reachable by delegation tools, and, for a session this
// process holds the lease of, what is still pending is flushed and the
// lease released, so another process can resume it at once.
func (s *Session) Close() {
	// The title call and SessionEnd hooks append to the log: they end
	// before the flush.
	s.SettleTitle(context.Background())
	s.hooks.close("other")
	s.jobs.detach(s.Log.ID())
	if s.terms != nil {
		// The session's terminals end with it (TERM, then KILL).
		s.terms.CloseOwner(s.Log.ID())
	}
	if s.mcpBridge != nil {
		s.mcpBridge.Close()
	}
	s.mcpOwn.Close()
	runClosers(s.closers)
	if s.sandbox != nil {
		_ = s.sandbox.Close() // its commands ended with their calls
	}
	if s.live != nil {
		s.live.remove(s.Log.ID())
	}
	if s.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Log.Flush(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "dsh: %v\n", err)
		}
		if err := s.lease.Release(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "dsh: %v\n", err)
		}
	}
}

// runClosers runs fs in reverse order of registration.
func runClosers(fs []func()) {
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
