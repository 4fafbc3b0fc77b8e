package sessionquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// MaxRead is the most events one Read returns.
const MaxRead = 50

// Read returns the events of session id at seqs, or (seqs empty) the
// events from seq from to seq to inclusive (to < 0: from + MaxRead - 1),
// at most MaxRead of them; missing lists requested seqs the log does not
// have (yet).
func (s *Service) Read(ctx context.Context, sc *Scope, id string, seqs []int64, from, to int64) (events []session.Event, missing []int64, err error) {
	full, err := s.resolve(ctx, sc, id)
	if err != nil {
		return nil, nil, err
	}
	if len(seqs) > MaxRead {
		return nil, nil, errorf(CodeInvalidArgument, "at most %d seqs per read", MaxRead)
	}
	if len(seqs) == 0 {
		if from < 0 {
			return nil, nil, errorf(CodeInvalidArgument, "from must be 0 or more")
		}
		if to < 0 {
			to = from + MaxRead - 1
		}
		if to < from {
			return nil, nil, errorf(CodeInvalidArgument, "to (%d) is before from (%d)", to, from)
		}
		to = min(to, from+MaxRead-1)
		seqs = make([]int64, 0, to-from+1)
		for q := from; q <= to; q++ {
			seqs = append(seqs, q)
		}
	}
	want := map[int64]bool{}
	lo := seqs[0]
	for _, q := range seqs {
		if q < 0 {
			return nil, nil, errorf(CodeInvalidArgument, "seq %d is negative", q)
		}
		want[q] = true
		lo = min(lo, q)
	}
	all, err := s.st.ReadFrom(ctx, full, lo)
	if err != nil {
		return nil, nil, fmt.Errorf("read session %s: %w", full, err)
	}
	found := map[int64]bool{}
	for _, e := range all {
		if want[e.Seq] {
			events = append(events, e)
			found[e.Seq] = true
		}
	}
	for _, q := range seqs {
		if !found[q] && !slices.Contains(missing, q) {
			missing = append(missing, q)
		}
	}
	return events, missing, nil
}

// Node is one session of a lineage.
type Node struct {
	ID     string
	Parent string
	// Origin is the header's origin ("subagent", "fork", "" for a
	// session a person started…).
	Origin string
	// Depth is the distance below the traced session (negative for
	// ancestors: -1 its parent).
	Depth     int
	Title     string
	Status    string
	Cwd       string
	Events    int64
	UpdatedAt int64
}

// Lineage is a session with its ancestors and descendants.
type Lineage struct {
	Session Node
	// Ancestors, nearest first.
	Ancestors []Node
	// Descendants in pre-order (a parent before its children).
	Descendants []Node
	// Hidden counts related sessions outside the caller's scope, which
	// are not shown.
	Hidden int
}

// Trace returns the lineage of session id: its parents up to the root,
// and its children and forks, recursively.
func (s *Service) Trace(ctx context.Context, sc *Scope, id string) (Lineage, error) {
	full, err := s.resolve(ctx, sc, id)
	if err != nil {
		return Lineage{}, err
	}
	h, err := s.st.Header(ctx, full)
	if err != nil {
		return Lineage{}, err
	}
	var l Lineage
	if l.Session, err = s.node(ctx, h.ID, 0); err != nil {
		return Lineage{}, err
	}
	anc, err := s.ancestors(ctx, h)
	if err != nil {
		return Lineage{}, err
	}
	for i, a := range anc {
		if !sc.Sees(ctx, a.ID) {
			// Above a hidden ancestor nothing is shown either: its chain
			// would name sessions of another workspace.
			l.Hidden += len(anc) - i
			break
		}
		n, err := s.node(ctx, a.ID, -(i + 1))
		if err != nil {
			return Lineage{}, err
		}
		l.Ancestors = append(l.Ancestors, n)
	}
	desc, err := s.descendants(ctx, full)
	if err != nil {
		return Lineage{}, err
	}
	hidden := map[string]bool{}
	for _, d := range desc {
		if hidden[d.parent] || !sc.Sees(ctx, d.id) {
			hidden[d.id] = true
			l.Hidden++
			continue
		}
		n, err := s.node(ctx, d.id, d.depth)
		if err != nil {
			return Lineage{}, err
		}
		l.Descendants = append(l.Descendants, n)
	}
	return l, nil
}

func (s *Service) node(ctx context.Context, id string, depth int) (Node, error) {
	e, err := s.st.Get(ctx, id)
	if err != nil {
		return Node{}, err
	}
	return Node{ID: id, Parent: e.Header.ParentSession, Origin: e.Header.Origin, Depth: depth, Title: e.Title,
		Status: e.Status, Cwd: e.Header.Cwd, Events: e.Events, UpdatedAt: e.UpdatedAt}, nil
}

// Related is an event related to a traced one.
type Related struct {
	// Relation says how: "result" (of a call), "call" (of a result),
	// "requested-by" (the assistant message with the call), "requests" (the
	// calls an assistant message made), "message" (the message a chunk
	// was streamed into), "chunks" (a message's streamed chunks),
	// "cites"/"cited-by" (sourceEventSeqs), "approval"
	// (asked/decided of a call), "decision"/"question" (of an approval),
	// "queued-by"/"entered-as" (an inbox splice and the user/message that
	// took its message into the history), "start"/"end" (of a turn, step
	// or subagent run), "child-session" (a subagent run's session).
	Relation string
	Event    session.Event
	// SessionID is set for "child-session" only.
	SessionID string
}

// EventTrace is an event and what it caused or answered.
type EventTrace struct {
	SessionID string
	Event     session.Event
	Related   []Related
}

// keys are the fields that relate events, decoded from any payload.
type keys struct {
	CallID  string `json:"callId"`
	ID      string `json:"id"`
	RunID   string `json:"runId"`
	ChildID string `json:"childId"`
	Turn    *int   `json:"turn"`
	Step    *int   `json:"step"`
	Message struct {
		ID      string `json:"id"`
		Content []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"content"`
	} `json:"message"`
	Inserted []struct {
		ID string `json:"id"`
	} `json:"inserted"`
}

func keysOf(e session.Event) keys {
	var k keys
	_ = json.Unmarshal(e.Data, &k)
	return k
}

// maxChunks is how many chunks of a message a trace lists (the first
// and last halves); a long reply has thousands.
const maxChunks = 8

// TraceEvent returns event seq of session id with the events it is
// related to, in log order.
func (s *Service) TraceEvent(ctx context.Context, sc *Scope, id string, seq int64) (EventTrace, error) {
	full, err := s.resolve(ctx, sc, id)
	if err != nil {
		return EventTrace{}, err
	}
	if seq < 0 {
		return EventTrace{}, errorf(CodeInvalidArgument, "seq %d is negative", seq)
	}
	events, err := s.st.ReadFrom(ctx, full, 0)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return EventTrace{}, notFound(id)
		}
		return EventTrace{}, fmt.Errorf("trace session %s: %w", full, err)
	}
	if seq >= int64(len(events)) || events[seq].Seq != seq {
		return EventTrace{}, errorf(CodeEventNotFound, "session %s has no event at seq %d (it has %d events)", full, seq, len(events))
	}
	t := EventTrace{SessionID: full, Event: events[seq]}
	target, tk := events[seq], keysOf(events[seq])
	rel := map[int64]string{}
	add := func(q int64, r string) {
		if q != seq && q >= 0 && q < int64(len(events)) {
			if _, ok := rel[q]; !ok {
				rel[q] = r
			}
		}
	}
	// What the target cites, by seq.
	var chunks []int64
	for _, q := range target.SourceEventSeqs {
		if q >= 0 && q < int64(len(events)) && events[q].Type == session.TypeAssistantChunk {
			chunks = append(chunks, q)
			continue
		}
		add(q, "cites")
	}
	if len(chunks) > maxChunks {
		chunks = append(chunks[:maxChunks/2], chunks[len(chunks)-maxChunks/2:]...)
	}
	for _, q := range chunks {
		add(q, "chunks")
	}
	calls := map[string]bool{}
	if target.Type == session.TypeAssistantMsg {
		for _, b := range tk.Message.Content {
			if b.Type == "tool_call" || b.ID != "" {
				calls[b.ID] = true
			}
		}
	}
	queued := map[string]bool{}
	for _, in := range tk.Inserted {
		queued[in.ID] = true
	}
	for _, e := range events {
		if e.Seq == seq {
			continue
		}
		if slices.Contains(e.SourceEventSeqs, seq) {
			if target.Type == session.TypeAssistantChunk && e.Type == session.TypeAssistantMsg {
				add(e.Seq, "message")
			} else {
				add(e.Seq, "cited-by")
			}
		}
		k := keysOf(e)
		switch {
		case tk.CallID != "" && k.CallID == tk.CallID:
			switch e.Type {
			case session.TypeToolResult:
				add(e.Seq, "result")
			case session.TypeToolCall:
				add(e.Seq, "call")
			default:
				add(e.Seq, "approval")
			}
		case tk.CallID != "" && e.Type == session.TypeAssistantMsg && hasCall(k, tk.CallID):
			add(e.Seq, "requested-by")
		case calls[k.CallID] && e.Type == session.TypeToolCall:
			add(e.Seq, "requests")
		case target.Type == session.TypeApprovalAsked && e.Type == session.TypeApprovalDecided && k.ID == tk.ID && tk.ID != "":
			add(e.Seq, "decision")
		case target.Type == session.TypeApprovalDecided && e.Type == session.TypeApprovalAsked && k.ID == tk.ID && tk.ID != "":
			add(e.Seq, "question")
		case target.Type == session.TypeUserMessage && e.Type == session.TypeInboxSpliced && insertedHas(k, tk.ID):
			add(e.Seq, "queued-by")
		case target.Type == session.TypeInboxSpliced && e.Type == session.TypeUserMessage && queued[k.ID] && k.ID != "":
			add(e.Seq, "entered-as")
		case tk.RunID != "" && k.RunID == tk.RunID:
			if e.Type == session.TypeSubagentEnd {
				add(e.Seq, "end")
			} else {
				add(e.Seq, "start")
			}
		default:
			if r := pairOf(target.Type, e.Type); r != "" && sameInt(k.Turn, tk.Turn) && (target.Type == session.TypeTurnStart || target.Type == session.TypeTurnEnd || sameInt(k.Step, tk.Step)) {
				add(e.Seq, r)
			}
		}
	}
	for q := range rel {
		t.Related = append(t.Related, Related{Relation: rel[q], Event: events[q]})
	}
	slices.SortFunc(t.Related, func(a, b Related) int { return int(a.Event.Seq - b.Event.Seq) })
	if tk.ChildID != "" && sc.Sees(ctx, tk.ChildID) {
		t.Related = append(t.Related, Related{Relation: "child-session", SessionID: tk.ChildID})
	}
	return t, nil
}

func hasCall(k keys, id string) bool {
	for _, b := range k.Message.Content {
		if b.ID == id {
			return true
		}
	}
	return false
}

func insertedHas(k keys, id string) bool {
	if id == "" {
		return false
	}
	for _, in := range k.Inserted {
		if in.ID == id {
			return true
		}
	}
	return false
}

// pairOf names e's relation to target when they open and close the same
// span (a turn, a step).
func pairOf(target, e string) string {
	switch {
	case target == session.TypeTurnStart && e == session.TypeTurnEnd, target == session.TypeStepStart && e == session.TypeStepEnd:
		return "end"
	case target == session.TypeTurnEnd && e == session.TypeTurnStart, target == session.TypeStepEnd && e == session.TypeStepStart:
		return "start"
	}
	return ""
}

func sameInt(a, b *int) bool { return a != nil && b != nil && *a == *b }
