package subagent

import (
	"context"
	"fmt"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
)

// CodeFactoryInvalid rejects a child a Factory built against the rules
// CheckChild enforces (a wrong header, seed or end-seed position, a busy
// agent): the composition root has a bug, and the run does not start.
const CodeFactoryInvalid = "FACTORY_INVALID"

// OriginSubagent is the header Origin of every subagent child.
const OriginSubagent = "subagent"

// ChildHeader is the header of a new child built from spec: id, the
// parent's cwd and agent preset, ParentSession = the parent's id, Origin
// "subagent", DelegationDepth = spec.Depth and, for a fork (Seed != nil),
// SeedLength = len(Seed).
func ChildHeader(spec ChildSpec, id string, createdAt int64) session.Header {
	ph := spec.Parent.Header()
	h := session.Header{
		Version: session.FormatVersion, ID: id, CreatedAt: createdAt, Cwd: ph.Cwd,
		ParentSession: ph.ID, Origin: OriginSubagent, DelegationDepth: spec.Depth, AgentPreset: ph.AgentPreset,
	}
	if spec.Seed != nil {
		n := int64(len(spec.Seed))
		h.SeedLength = &n
	}
	return h
}

// ChildStore persists a new child: its header, then its events.
type ChildStore interface {
	Create(ctx context.Context, h session.Header) error
	session.Sink
}

// NewChildLog creates the log of a new child exactly as a Factory must:
// the header of ChildHeader is persisted with the seed as the child's
// own leading events (through st; nil keeps the log in memory, for
// tests), and, when the seed is not empty, session/end-seed is the first
// live event. Construct the agent (agent.New) right after it returns and
// before appending anything else: agent.New adds its own end-seed on
// first write unless the log's last event is one, so anything appended
// before it (permission events) would produce a second marker.
func NewChildLog(ctx context.Context, st ChildStore, spec ChildSpec, id string) (*session.Log, error) {
	if spec.Parent == nil {
		return nil, fmt.Errorf("new child: the spec has no parent")
	}
	h := ChildHeader(spec, id, time.Now().UnixMilli())
	var sink session.Sink
	if st != nil {
		if err := st.Create(ctx, h); err != nil {
			return nil, err
		}
		if len(spec.Seed) > 0 {
			if err := st.Append(ctx, h.ID, spec.Seed); err != nil {
				return nil, err
			}
		}
		sink = st
	}
	log, err := session.NewLog(h, spec.Seed, sink)
	if err != nil {
		return nil, err
	}
	if len(spec.Seed) > 0 {
		if _, err := log.Append(session.TypeEndSeed, struct{}{}); err != nil {
			return nil, err
		}
	}
	return log, nil
}

// CheckChild verifies what a Factory returned for spec before anything
// runs it: an idle agent over the child's own log; the header
// ChildHeader describes (any id and time); the seed as the log's leading
// events, followed by exactly one session/end-seed when it is not empty
// and by none when it is. Start (spawn, fork) and the continuable manager
// refuse a child that fails it with CodeFactoryInvalid.
func CheckChild(spec ChildSpec, c Child) error {
	bad := func(format string, args ...any) error {
		return errorf(CodeFactoryInvalid, "the subagent factory built an invalid child: "+format, args...)
	}
	if c == nil || c.Log() == nil || c.Agent() == nil {
		return bad("no child, log or agent")
	}
	log := c.Log()
	h := log.Header()
	want := ChildHeader(spec, h.ID, h.CreatedAt)
	switch {
	case h.ID == "" || h.ID != c.ID():
		return bad("header id %q, child id %q", h.ID, c.ID())
	case h.ParentSession != want.ParentSession:
		return bad("parentSession %q, want %q", h.ParentSession, want.ParentSession)
	case h.Origin != want.Origin:
		return bad("origin %q, want %q", h.Origin, want.Origin)
	case h.DelegationDepth != want.DelegationDepth:
		return bad("delegationDepth %d, want %d", h.DelegationDepth, want.DelegationDepth)
	case h.Cwd != want.Cwd:
		return bad("cwd %q, want the parent's %q", h.Cwd, want.Cwd)
	case h.AgentPreset != want.AgentPreset:
		return bad("agentPreset %q, want the parent's %q", h.AgentPreset, want.AgentPreset)
	case (h.SeedLength == nil) != (want.SeedLength == nil) || h.SeedLength != nil && *h.SeedLength != *want.SeedLength:
		return bad("seedLength %v, want %v", seedLen(h.SeedLength), seedLen(want.SeedLength))
	}
	if c.Agent().Log() != log {
		return bad("the agent runs another log")
	}
	if c.Agent().Busy() {
		return bad("the agent is already running")
	}
	view := log.View()
	events := view.Slice(0, view.Len()) // a child's log: short, and checked once
	n := len(spec.Seed)
	if len(events) < n || log.FirstLiveSeq() != int64(n) {
		return bad("the log does not start with the %d seed events (first live seq %d)", n, log.FirstLiveSeq())
	}
	for i, e := range spec.Seed {
		if events[i].Seq != e.Seq || events[i].Type != e.Type {
			return bad("event %d is %s, the seed has %s", i, events[i].Type, e.Type)
		}
	}
	ends := 0
	for _, e := range events[n:] {
		if e.Type == session.TypeEndSeed {
			ends++
		}
	}
	switch {
	case n > 0 && (len(events) == n || events[n].Type != session.TypeEndSeed):
		return bad("the first live event is not session/end-seed")
	case n > 0 && ends != 1:
		return bad("%d session/end-seed events after the seed, want 1", ends)
	case n == 0 && ends != 0:
		return bad("session/end-seed in a child without a seed")
	}
	return nil
}

func seedLen(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}
