package session

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dsh-dev/dsh/internal/llm"
)

// InboxRef names a message that an agent/inbox/spliced event inserted:
// the splice's seq and the message's index in its Inserted list.
//
// A message that waited in the inbox is already in the log, in the
// splice that queued it, when it enters the history. Its user/message is
// then stored as a reference ({"id":…,"inboxRef":{…}}) rather than a
// second copy, so a prompt is stored once. A [Log] holds and hands out
// the expanded form (the whole message, exactly as an unreferenced
// user/message), so readers never see the reference; only the sink gets
// it, and [ExpandEvents] restores what the sink returns.
type InboxRef struct {
	Seq   int64 `json:"seq"`
	Index int   `json:"index"`
}

// storedRef is the stored data of a referencing user/message.
type storedRef struct {
	ID       string    `json:"id"`
	InboxRef *InboxRef `json:"inboxRef"`
}

// FromInbox stores a user/message as a reference to the inbox splice
// that queued its message (see [InboxRef]). Append checks that the
// splice holds exactly the appended message.
func FromInbox(ref InboxRef) AppendOption {
	return func(e *Event) { e.inboxRef = &ref }
}

// inboxMessageAt returns the raw message that ref names, over a lookup
// of events by seq.
func inboxMessageAt(at func(int64) (Event, bool), ref InboxRef) (json.RawMessage, error) {
	sp0, ok := at(ref.Seq)
	if !ok || sp0.Type != TypeInboxSpliced {
		return nil, fmt.Errorf("inbox reference to seq %d: no agent/inbox/spliced event there", ref.Seq)
	}
	var sp struct {
		Inserted []json.RawMessage `json:"inserted"`
	}
	if err := sp0.Decode(&sp); err != nil {
		return nil, err
	}
	if ref.Index < 0 || ref.Index >= len(sp.Inserted) {
		return nil, fmt.Errorf("inbox reference to message %d of seq %d, which inserted %d", ref.Index, ref.Seq, len(sp.Inserted))
	}
	return sp.Inserted[ref.Index], nil
}

// storedForm returns the stored data of a user/message that references
// the inbox: it checks that data (the whole message) equals the inserted
// one.
func storedForm(at func(int64) Event, n int64, data json.RawMessage, ref InboxRef) (json.RawMessage, error) {
	inserted, err := inboxMessageAt(func(seq int64) (Event, bool) {
		if seq < 0 || seq >= n {
			return Event{}, false
		}
		return at(seq), true
	}, ref)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(compactJSON(inserted), compactJSON(data)) {
		return nil, fmt.Errorf("inbox reference to seq %d index %d: the message differs from the one queued", ref.Seq, ref.Index)
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return json.Marshal(storedRef{ID: m.ID, InboxRef: &ref})
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// HasInboxRefs reports whether any of events is a user/message stored as
// an inbox reference, which [ExpandEvents] would expand.
func HasInboxRefs(events []Event) bool {
	for _, e := range events {
		if isRef(e) {
			return true
		}
	}
	return false
}

func isRef(e Event) bool {
	return e.Type == TypeUserMessage && bytes.Contains(e.Data, []byte(`"inboxRef"`))
}

// expandEvent returns e with a referencing user/message replaced by the
// whole message it references among events (indexed by seq, at least up
// to e). Any other event is returned as is.
func expandEvent(events []Event, e Event) (Event, error) {
	if !isRef(e) {
		return e, nil
	}
	return expandRef(func(seq int64) (Event, bool) {
		if seq < 0 || seq >= int64(len(events)) {
			return Event{}, false
		}
		return events[seq], true
	}, e)
}

// expandRef expands the referencing user/message e over a lookup of
// events by seq.
func expandRef(at func(int64) (Event, bool), e Event) (Event, error) {
	var r storedRef
	if err := e.Decode(&r); err != nil || r.InboxRef == nil {
		return e, err
	}
	raw, err := inboxMessageAt(at, *r.InboxRef)
	if err != nil {
		return e, fmt.Errorf("event %d: %w", e.Seq, err)
	}
	var m llm.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return e, fmt.Errorf("event %d: %w", e.Seq, err)
	}
	if m.ID != r.ID {
		return e, fmt.Errorf("event %d: inbox reference names message %s, seq %d index %d holds %s", e.Seq, r.ID, r.InboxRef.Seq, r.InboxRef.Index, m.ID)
	}
	e.Data = raw
	return e, nil
}

// ExpandEvents returns events (a whole log from seq 0, as a store reads
// it) with every user/message stored as an inbox reference expanded to
// the message, the form a [Log] holds. Expanded events pass through
// unchanged, so expanding twice is harmless. The input is not modified.
func ExpandEvents(events []Event) ([]Event, error) {
	var out []Event
	for i, e := range events {
		x, err := expandEvent(events, e)
		if err != nil {
			return nil, err
		}
		if out == nil && !bytes.Equal(x.Data, e.Data) {
			out = append(make([]Event, 0, len(events)), events[:i]...)
		}
		if out != nil {
			out = append(out, x)
		}
	}
	if out == nil {
		return events, nil
	}
	return out, nil
}

// Expander expands the inbox references of a stored log read in seq
// order, a page at a time, as [ExpandEvents] does for a whole one. It
// keeps only the agent/inbox/spliced events (what a reference can name;
// two or so per turn), not the log. The zero value is ready.
type Expander struct {
	spliced map[int64]Event
}

// Expand returns e expanded; e must follow the events given before.
func (x *Expander) Expand(e Event) (Event, error) {
	if e.Type == TypeInboxSpliced {
		if x.spliced == nil {
			x.spliced = map[int64]Event{}
		}
		x.spliced[e.Seq] = e
	}
	if !isRef(e) {
		return e, nil
	}
	return expandRef(func(seq int64) (Event, bool) {
		sp, ok := x.spliced[seq]
		return sp, ok
	}, e)
}
