// Package projection folds a session log into small derived states
// ("projections"): the todo list, token usage, context pressure and
// whatever else a UI or a policy needs without rereading the log.
//
// A [Unit] is a pure, synchronous fold: Init gives the empty state and
// Apply folds one event into it. A [Registry] holds units; [Registry.Attach]
// binds them to a live [session.Log]: the events already in the log are
// folded once, and every later append is folded as it happens. Each unit
// keeps a watermark (the seq of the last event it folded), so a live
// session never refolds from zero and a unit seeded from a checkpoint
// ([Registry.AttachFrom]) only folds the tail.
//
// States are shared with readers. Apply must therefore never mutate the
// state it is given: it returns the same value when the event changes
// nothing and a fresh value (copy-on-write) when it does.
package projection

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/dsh-dev/dsh/internal/session"
)

// Unit is one projection: a pure fold over session events.
type Unit struct {
	// Key names the projection; unique within a registry.
	Key string
	// Init returns the state of an empty log.
	Init func() any
	// Apply folds e into state and returns the new state. It runs under
	// the log's lock, so it must be cheap, must not block and must not
	// touch the log. It must not mutate state: return state itself when
	// nothing changed, a new value otherwise.
	Apply func(state any, e session.Event) any
	// Types lists the event types Apply folds; nil means every type.
	// Apply is called only with these (other events still advance the
	// unit's watermark), and the first fold of a log reads only them, so
	// the payloads of other types a resumed log left in the store are
	// not read back.
	Types []string
}

// Typed builds a Unit from a typed fold over the event types it folds
// (nil: every type; see [Unit.Types]), so unit authors work with their
// own state type and never write type assertions; read it back with
// [GetAs].
func Typed[S any](key string, types []string, init func() S, apply func(S, session.Event) S) Unit {
	return Unit{
		Key:   key,
		Types: types,
		Init:  func() any { return init() },
		Apply: func(state any, e session.Event) any {
			s, _ := state.(S)
			return apply(s, e)
		},
	}
}

// Registry holds the units to attach. Register every unit before
// attaching; Attach copies the current list.
type Registry struct {
	mu    sync.Mutex
	units []Unit
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Register adds u. It fails on an empty key, a missing Init or Apply, or
// a key already registered.
func (r *Registry) Register(u Unit) error {
	if u.Key == "" {
		return errors.New("projection: unit has no key")
	}
	if u.Init == nil || u.Apply == nil {
		return fmt.Errorf("projection %s: Init and Apply are required", u.Key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.units {
		if have.Key == u.Key {
			return fmt.Errorf("projection %s is already registered", u.Key)
		}
	}
	r.units = append(r.units, u)
	return nil
}

// Keys returns the registered keys in registration order.
func (r *Registry) Keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, len(r.units))
	for i, u := range r.units {
		keys[i] = u.Key
	}
	return keys
}

// Types is the union of the registered units' types: what the first
// fold of a log reads. Nil means every type (a unit without Types).
func (r *Registry) Types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return unionTypes(r.units)
}

// Checkpoint is a unit state known to be the fold of every event up to
// and including Seq (e.g. read back from a projection cache).
type Checkpoint struct {
	State any
	Seq   int64
}

// Attach binds the registered units to log and folds its events. See
// [Registry.AttachFrom].
func (r *Registry) Attach(log *session.Log) *Projections {
	return r.AttachFrom(log, nil)
}

// AttachFrom binds the registered units to log. A unit with a checkpoint
// starts from it and folds only the events after its Seq; the others
// start from Init. Every event appended afterwards is folded as it is
// appended, so Get never refolds history.
func (r *Registry) AttachFrom(log *session.Log, from map[string]Checkpoint) *Projections {
	r.mu.Lock()
	units := slices.Clone(r.units)
	r.mu.Unlock()
	p := &Projections{cells: make([]cell, len(units)), index: make(map[string]int, len(units))}
	for i, u := range units {
		c := cell{unit: u, mark: -1}
		if cp, ok := from[u.Key]; ok {
			c.state, c.mark = cp.State, cp.Seq
		} else {
			c.state = u.Init()
		}
		p.cells[i] = c
		p.index[u.Key] = i
	}
	// Observe before reading the events: an append racing with Attach is
	// then seen twice (buffered and in Events) rather than never, and the
	// watermark drops the duplicate. The log is read before p.mu is
	// taken, so that no projection lock is ever held while calling into
	// the log.
	// Payloads released from memory are read back a page at a time,
	// each event folded under p.mu on its own, so no lock is held across
	// the read; one that cannot be read is folded from its envelope.
	log.Observe(p.observe)
	fold := func(e session.Event) error {
		p.mu.Lock()
		p.foldLocked(e)
		p.mu.Unlock()
		return nil
	}
	// Every event before n is in the scan's view: the units have seen
	// (or had no use for) all of them.
	n := log.View().Len()
	if err := log.ScanTypes(context.Background(), 0, unionTypes(units), fold); err != nil {
		for e := range log.View().All() {
			_ = fold(e)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.cells {
		p.cells[i].mark = max(p.cells[i].mark, n-1)
	}
	for _, e := range p.early {
		p.foldLocked(e)
	}
	p.early, p.ready = nil, true
	return p
}

// Projections is a set of units attached to one log. It is safe for
// concurrent use.
type Projections struct {
	mu    sync.Mutex
	cells []cell          // guarded by mu
	index map[string]int  // read-only after AttachFrom
	ready bool            // guarded by mu; the initial fold is done
	early []session.Event // guarded by mu; appends seen before ready
}

type cell struct {
	unit  Unit
	state any
	mark  int64 // seq of the last event folded; -1 before any
}

func (p *Projections) observe(e session.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		p.early = append(p.early, e)
		return
	}
	p.foldLocked(e)
}

func (p *Projections) foldLocked(e session.Event) {
	for i := range p.cells {
		c := &p.cells[i]
		if e.Seq <= c.mark {
			continue // already folded (checkpoint or duplicate delivery)
		}
		if c.unit.Types == nil || slices.Contains(c.unit.Types, e.Type) {
			c.state = c.unit.Apply(c.state, e)
		}
		c.mark = e.Seq
	}
}

// Get returns the state of key and the seq of the last event folded into
// it (-1 when none). An unknown key gives (nil, -1). The state must be
// treated as read-only.
func (p *Projections) Get(key string) (state any, asOfSeq int64) {
	i, ok := p.index[key]
	if !ok {
		return nil, -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cells[i].state, p.cells[i].mark
}

// Has reports whether key is attached.
func (p *Projections) Has(key string) bool {
	_, ok := p.index[key]
	return ok
}

// GetAs returns the state of key as S. ok is false when the key is not
// attached or its state is not an S.
func GetAs[S any](p *Projections, key string) (state S, asOfSeq int64, ok bool) {
	v, seq := p.Get(key)
	state, ok = v.(S)
	return state, seq, ok
}

// Snapshot returns every state at one consistent cut: no event is folded
// into one unit and not another between the reads.
func (p *Projections) Snapshot() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]any, len(p.cells))
	for _, c := range p.cells {
		out[c.unit.Key] = c.state
	}
	return out
}

// Checkpoints returns every unit's state with its watermark, for a cache
// that later seeds [Registry.AttachFrom].
func (p *Projections) Checkpoints() map[string]Checkpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Checkpoint, len(p.cells))
	for _, c := range p.cells {
		out[c.unit.Key] = Checkpoint{State: c.state, Seq: c.mark}
	}
	return out
}

// Keys returns the attached keys, sorted.
func (p *Projections) Keys() []string {
	return slices.Sorted(maps.Keys(p.index))
}

// unionTypes is the types some unit folds; nil when one folds every type.
func unionTypes(units []Unit) []string {
	var out []string
	for _, u := range units {
		if u.Types == nil {
			return nil
		}
		for _, t := range u.Types {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}
