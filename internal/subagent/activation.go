package subagent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// DeliverFunc delivers msg to a session the manager does not drive (a
// top-level parent): wake means Agent.Steer, otherwise Agent.Inject. It
// is called with the manager's lock held, so it must not call back into
// the Manager.
type DeliverFunc func(parentID string, msg llm.Message, wake bool) error

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Service admits requests (depth, capabilities). Required.
	Service *Service
	// Factory creates and cold-resumes children. Required.
	Factory ResumeFactory
	// Deliver reaches parents the manager does not drive. Required.
	Deliver DeliverFunc
	// ResolveLog returns a live session's log by id. Optional: without it
	// a send to a child the manager has never seen (e.g. after a restart)
	// is not delivered.
	ResolveLog func(sessionID string) (*session.Log, error)
}

// Manager owns the activations of continuable children: at most one live
// activation per child, which runs the child's agent until it is idle,
// has no pending input and all its own continuable children have
// settled, and then delivers one settle notice to the direct parent. It
// is safe for concurrent use.
type Manager struct {
	o      ManagerOptions
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	nodes   map[string]*node // guarded by mu; every continuable child by id
	closing bool             // guarded by mu
	changed chan struct{}    // guarded by mu; closed and replaced on state changes
}

// node is one continuable child.
type node struct {
	id, parentID, provider, label string
	parentLog                     *session.Log
	depth                         int
	child                         Child // nil when inactive
	state                         string

	// Activation epoch.
	runID      string
	epochStart int           // child log length when the epoch began
	signal     chan struct{} // cap 1: new input or a child settled
	parked     bool          // the last turn did not complete; input waits for a waking send
	ran        bool
	last       agent.Outcome
	failure    error
}

// NewManager returns a manager.
func NewManager(o ManagerOptions) (*Manager, error) {
	if o.Service == nil || o.Factory == nil || o.Deliver == nil {
		return nil, errors.New("subagent manager: Service, Factory and Deliver are required")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Manager{o: o, ctx: ctx, cancel: cancel, nodes: map[string]*node{}, changed: make(chan struct{})}, nil
}

// StartContinuable admits req, creates the child through the provider's
// factory path (a fork seeds it with the parent's completed turns),
// records its continuable descriptor, logs subagent/start to the parent
// and queues the prompt. It returns the child id once the prompt is
// accepted; from then on the manager owns the activation, and ctx (which
// bounds only creation) no longer matters.
func (m *Manager) StartContinuable(ctx context.Context, provider string, req Request) (string, error) {
	p, ok := m.o.Service.Provider(provider)
	if !ok {
		return "", errorf(CodeUnknownProvider, "unknown subagent provider %q (registered: %s)", provider, orNone(m.o.Service.Providers()))
	}
	if strings.TrimSpace(req.Label) == "" {
		return "", errorf(CodeInvalidRequest, "a continuable subagent needs a label (its delegation description)")
	}
	if len(req.OutputSchema) > 0 {
		return "", errorf(CodeUnsupportedCapability, "a continuable subagent has no single result, so it takes no outputSchema")
	}
	if err := m.o.Service.admit(p, &req); err != nil {
		return "", err
	}
	if err := m.checkOpen(); err != nil {
		return "", err
	}
	spec := ChildSpec{
		Parent: req.Parent, Depth: req.Depth, Label: req.Label,
		Provider: req.Provider, Model: req.Model, Effort: req.Effort,
		Tools: req.Tools, Persona: req.Persona, Permission: req.Permission,
	}
	if p.Capabilities().InheritsContext {
		parent, err := req.Parent.Read(ctx, 0, -1)
		if err != nil {
			return "", fmt.Errorf("fork: %w", err)
		}
		spec.Seed = ForkSeed(parent)
	}
	child, err := m.o.Factory.NewChild(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("create subagent: %w", err)
	}
	if err := CheckChild(spec, child); err != nil {
		return "", errors.Join(err, child.Close())
	}
	desc := ContinuableDescriptor{
		Version: DescriptorVersion, Mode: ModeContinuable, Provider: p.Name(), Label: req.Label,
		AgentProvider: req.Provider, AgentModel: req.Model, AgentEffort: req.Effort, Persona: req.Persona,
	}
	if !req.Tools.IsZero() {
		f := req.Tools
		desc.ToolFilter = &f
	}
	if _, err := child.Log().Append(session.TypeSubagentDescriptor, desc); err != nil {
		return "", errors.Join(err, child.Close())
	}
	ag := child.Agent()
	// A fork seed can end with the parent's queued input; the child must
	// not run it as its own.
	if nt, ns := ag.Pending(); nt+ns > 0 {
		if err := ag.Cancel("parent", false); err != nil {
			return "", errors.Join(err, child.Close())
		}
	}
	n := &node{
		id: child.ID(), parentID: req.Parent.Header().ID, provider: p.Name(), label: req.Label,
		parentLog: req.Parent, depth: req.Depth, child: child, state: StateInactive,
		signal: make(chan struct{}, 1),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return "", errors.Join(errorf(CodeNotDelivered, "the subagent manager is closing"), child.Close())
	}
	if err := ag.Queue(llm.Message{
		ID: newID(), Role: llm.RoleUser, Content: append([]llm.Block(nil), req.Prompt...),
		Source: llm.Source{Kind: SourceParent, Form: "delegation"},
	}); err != nil {
		return "", errors.Join(err, child.Close())
	}
	m.nodes[n.id] = n
	if err := m.beginLocked(n); err != nil {
		delete(m.nodes, n.id)
		return "", errors.Join(err, child.Close())
	}
	return n.id, nil
}

func (m *Manager) checkOpen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return errorf(CodeNotDelivered, "the subagent manager is closing")
	}
	return nil
}

// beginLocked starts a new activation epoch of a live, non-active node:
// it logs subagent/start to the parent and starts the driver.
func (m *Manager) beginLocked(n *node) error {
	if m.closing {
		return errorf(CodeNotDelivered, "the subagent manager is closing")
	}
	runID := newID()
	if _, err := n.parentLog.Append(session.TypeSubagentStart, StartEvent{
		RunID: runID, ChildID: n.id, Provider: n.provider, Label: n.label, Mode: ModeContinuable, Depth: n.depth,
	}); err != nil {
		return err
	}
	n.runID, n.epochStart = runID, n.child.Log().Len()
	n.state, n.parked, n.ran, n.failure, n.last = StateRunning, false, false, nil, agent.Outcome{}
	m.changedLocked()
	m.wg.Add(1)
	go m.drive(n, n.child.Agent())
	return nil
}

// drive is one activation: it runs the agent while it has input, waits
// for the node's own children, and settles.
func (m *Manager) drive(n *node, ag *agent.Agent) {
	defer m.wg.Done()
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		nt, ns := ag.Pending()
		if nt+ns > 0 && !n.parked && m.ctx.Err() == nil {
			n.state = StateRunning
			m.changedLocked()
			m.mu.Unlock()
			out, err := ag.Run(m.ctx)
			m.mu.Lock()
			n.ran, n.last = true, out
			if err != nil {
				n.failure = err
			}
			// An interrupted or failed turn parks the rest of the inbox
			// until a waking send; otherwise the loop would retry at once.
			if err != nil || (out.Reason.Kind != session.EndCompleted && out.Reason.Kind != session.EndMaxTokens) {
				n.parked = true
			}
			continue
		}
		if m.activeChildrenLocked(n.id) {
			if n.state != StateWaiting {
				n.state = StateWaiting
				m.changedLocked()
			}
			m.mu.Unlock()
			<-n.signal
			m.mu.Lock()
			continue
		}
		m.settleLocked(n)
		return
	}
}

// settleLocked delivers the epoch's notice to the parent, closes the
// lifecycle pair and only then releases the node, so the parent has the
// notice before it can be judged settled.
func (m *Manager) settleLocked(n *node) {
	events := n.child.Log().Events()
	own := events[min(n.epochStart, len(events)):]
	stop, diag := StopCompleted, ""
	if n.ran {
		stop, diag = stopReason(n.last.Reason)
	}
	if n.failure != nil {
		stop, diag = StopError, n.failure.Error()
	}
	diag = clip(diag, MaxDiagnostic)
	notice := settleNotice(n.id, n.label, stop, diag, finalOutput(own))
	end := EndEvent{RunID: n.runID, ChildID: n.id, StopReason: stop, Diagnostic: diag}
	if u := totalUsage(own); !u.IsZero() {
		end.Usage = &u
	}
	if err := m.deliverLocked(n.parentID, notice, !m.closing); err != nil {
		end.Diagnostic = clip(end.Diagnostic+"; settle notice not delivered: "+err.Error(), MaxDiagnostic)
	}
	_, _ = n.parentLog.Append(session.TypeSubagentEnd, end)
	n.state = StateSettled
	m.changedLocked()
	if p, ok := m.nodes[n.parentID]; ok {
		poke(p)
	}
}

// deliverLocked hands msg to session id: a resident node's agent
// directly (a waking delivery to a settled node starts a new epoch),
// anything else through Deliver.
func (m *Manager) deliverLocked(id string, msg llm.Message, wake bool) error {
	p, ok := m.nodes[id]
	if !ok || p.child == nil {
		return m.o.Deliver(id, msg, wake)
	}
	ag := p.child.Agent()
	if !wake {
		return ag.Inject(msg)
	}
	if err := ag.Steer(msg); err != nil {
		return err
	}
	if p.state == StateSettled {
		return m.beginLocked(p)
	}
	p.parked = false
	poke(p)
	return nil
}

// activeChildrenLocked reports whether any continuable child of id has a
// live activation.
func (m *Manager) activeChildrenLocked(id string) bool {
	for _, c := range m.nodes {
		if c.parentID == id && active(c) {
			return true
		}
	}
	return false
}

func active(n *node) bool { return n.state == StateRunning || n.state == StateWaiting }

func poke(n *node) {
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (m *Manager) changedLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// descendantLocked reports whether n is below ancestor in the live
// lineage.
func (m *Manager) descendantLocked(n *node, ancestor string) bool {
	for seen := 0; seen <= len(m.nodes); seen++ {
		if n.parentID == ancestor {
			return true
		}
		p, ok := m.nodes[n.parentID]
		if !ok {
			return false
		}
		n = p
	}
	return false
}

// State returns a child's activation state (StateRunning, StateWaiting,
// StateSettled or StateInactive) and whether the manager knows it.
func (m *Manager) State(childID string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[childID]
	if !ok {
		return "", false
	}
	if n.child == nil {
		return StateInactive, true
	}
	return n.state, true
}

// Drain waits until every continuable descendant of parentID has
// settled, or ctx ends. The headless CLI calls it before exiting.
func (m *Manager) Drain(ctx context.Context, parentID string) error {
	for {
		m.mu.Lock()
		busy := false
		for _, n := range m.nodes {
			if active(n) && m.descendantLocked(n, parentID) {
				busy = true
				break
			}
		}
		ch := m.changed
		m.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Busy reports whether any continuable descendant of parentID has a live
// activation (what Drain would wait for), without waiting.
func (m *Manager) Busy(parentID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.nodes {
		if active(n) && m.descendantLocked(n, parentID) {
			return true
		}
	}
	return false
}

// Stop ends the work of every continuable descendant of parentID: the
// running turn of each active one is cancelled (cause "disposed", queued
// input kept), again whenever one starts another (a settle notice woke
// it), until all have settled or ctx ends. The session host calls it when
// it disposes a session, so that nothing keeps working for a session that
// is no longer live.
func (m *Manager) Stop(ctx context.Context, parentID string) error {
	for {
		m.mu.Lock()
		var running []*agent.Agent
		busy := false
		for _, n := range m.nodes {
			if active(n) && m.descendantLocked(n, parentID) {
				busy = true
				if n.child != nil {
					running = append(running, n.child.Agent())
				}
			}
		}
		ch := m.changed
		m.mu.Unlock()
		if !busy {
			return nil
		}
		for _, ag := range running {
			if err := ag.Cancel("disposed", true); err != nil {
				return err
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Release makes a settled child inactive: its agent and resources are
// released (Child.Close) and a later send cold-resumes it from its log.
// Releasing an active child is an error; an unknown or inactive one is a
// no-op.
func (m *Manager) Release(childID string) error {
	m.mu.Lock()
	n, ok := m.nodes[childID]
	if !ok || n.child == nil {
		m.mu.Unlock()
		return nil
	}
	if active(n) {
		m.mu.Unlock()
		return fmt.Errorf("subagent %s is still active", childID)
	}
	c := n.child
	n.child, n.state = nil, StateInactive
	m.changedLocked()
	m.mu.Unlock()
	return c.Close()
}

// Close stops every activation (their turns end aborted with cause
// "disposed"; settle notices are still delivered, without a wake), waits
// for them and releases every live child. It is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	m.cancel(&agent.CancelCause{Kind: "disposed"})
	m.wg.Wait()
	m.mu.Lock()
	var live []Child
	for _, n := range m.nodes {
		if n.child != nil {
			live = append(live, n.child)
			n.child, n.state = nil, StateInactive
		}
	}
	m.changedLocked()
	m.mu.Unlock()
	var errs []error
	for _, c := range live {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
