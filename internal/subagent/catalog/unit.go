package catalog

import (
	"iter"
	"slices"

	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
)

// Key is the projection key of the catalog unit.
const Key = "subagentCatalog"

// Modes of a catalog entry. ModeUnknown is a start event whose mode this
// build does not know (or that recorded none): the child is still listed
// and traversed, but nothing may assume what it can do.
const (
	// ModeOneShot is [subagent.ModeOneShot].
	ModeOneShot = subagent.ModeOneShot
	// ModeContinuable is [subagent.ModeContinuable].
	ModeContinuable = subagent.ModeContinuable
	// ModeUnknown is any other recorded mode.
	ModeUnknown = "unknown"
)

// Entry is one direct child in its parent's catalog.
type Entry struct {
	// ChildID is the child session's id.
	ChildID string `json:"childId"`
	// CreatedAt is the time of the parent's subagent/start, Unix
	// milliseconds: when the parent recorded the child, which is the
	// order the catalog keeps.
	CreatedAt int64 `json:"createdAt"`
	// Mode is ModeOneShot, ModeContinuable or ModeUnknown.
	Mode string `json:"mode"`
	// Label is the caller's display label, when it gave one.
	Label string `json:"label,omitempty"`
	// Provider names the subagent provider that started the child.
	Provider string `json:"provider,omitempty"`
	// Seq is the seq of that subagent/start in the parent's log, so that
	// a cached entry can be checked against the log's own suffix.
	Seq int64 `json:"seq"`
}

// Unit returns the catalog projection for the log whose header is h. Its
// state is a []Entry in parent event order (nil before the first child);
// read it with projection.GetAs[[]Entry](p, Key).
//
// The unit is bound to h because only the header says where a fork's
// inherited prefix ends (SeedLength): events below it are the parent's
// history and are skipped, though they still advance the watermark. The
// composition root registers it in the per-session registry it attaches
// to that session's log; a registry shared by logs of different headers
// must not hold it.
func Unit(h session.Header) projection.Unit {
	seed := seedLength(h)
	return projection.Typed(Key, []string{session.TypeSubagentStart}, func() []Entry { return nil }, func(s []Entry, e session.Event) []Entry {
		return apply(seed, s, e)
	})
}

// Fold folds a whole log into its catalog, exactly as [Unit] would: the
// cold path of a listing, where attaching a registry to a transient log
// would buy nothing.
func Fold(h session.Header, events []session.Event) []Entry {
	return FoldSeq(h, slices.Values(events))
}

// FoldSeq is [Fold] over an iterator of events (a live log's view).
func FoldSeq(h session.Header, events iter.Seq[session.Event]) []Entry {
	seed := seedLength(h)
	var s []Entry
	for e := range events {
		s = apply(seed, s, e)
	}
	return s
}

func seedLength(h session.Header) int64 {
	if h.SeedLength == nil {
		return 0
	}
	return *h.SeedLength
}

// apply is the fold. It never fails (a fold has no error channel): a start
// event that does not decode or names no child records nothing, because
// there is no child to list.
func apply(seed int64, s []Entry, e session.Event) []Entry {
	if e.Type != session.TypeSubagentStart || e.Seq < seed {
		return s
	}
	var p subagent.StartEvent
	if e.Decode(&p) != nil || p.ChildID == "" {
		return s
	}
	// One entry per child: a later start for the same child (a future
	// continuation run) does not move it or change its creation facts.
	// The scan is linear in the parent's children, which a model's
	// delegations keep small, and it keeps the state a plain slice.
	if slices.ContainsFunc(s, func(x Entry) bool { return x.ChildID == p.ChildID }) {
		return s
	}
	mode := p.Mode
	if mode != ModeOneShot && mode != ModeContinuable {
		mode = ModeUnknown
	}
	// Appending never writes an element an earlier state can see: states
	// of one log form a chain, each a prefix of the next.
	return append(s, Entry{ChildID: p.ChildID, CreatedAt: e.Time, Mode: mode, Label: p.Label, Provider: p.Provider, Seq: e.Seq})
}
