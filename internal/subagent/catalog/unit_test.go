package catalog_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// rawStart appends a subagent/start with arbitrary data.
func rawStart(t *testing.T, l *session.Log, data string) {
	t.Helper()
	if _, err := l.Append(session.TypeSubagentStart, json.RawMessage(data)); err != nil {
		t.Fatal(err)
	}
}

func TestUnitThroughRegistry(t *testing.T) {
	tests := []struct {
		name string
		// seed are the parent events a fork inherits (seq < SeedLength);
		// nil means a fresh session without a seed.
		seed []string
		// before is appended before the registry attaches, after it
		// attaches; both are the session's own events.
		before, after func(t *testing.T, l *session.Log)
		want          []string // child ids with mode, in order
	}{
		{
			name: "parent event order, not id order",
			before: func(t *testing.T, l *session.Log) {
				start(t, l, "zeta", subagent.ModeOneShot)
				start(t, l, "alpha", subagent.ModeContinuable)
			},
			after: func(t *testing.T, l *session.Log) {
				if _, err := l.Append(session.TypeTurnStart, session.TurnStart{Turn: 1}); err != nil {
					t.Fatal(err)
				}
				start(t, l, "mid", subagent.ModeOneShot)
			},
			want: []string{"zeta one-shot", "alpha continuable", "mid one-shot"},
		},
		{
			name: "a repeated start keeps the first entry",
			before: func(t *testing.T, l *session.Log) {
				start(t, l, "a", subagent.ModeOneShot)
				start(t, l, "b", subagent.ModeOneShot)
			},
			after: func(t *testing.T, l *session.Log) {
				start(t, l, "a", subagent.ModeContinuable)
			},
			want: []string{"a one-shot", "b one-shot"},
		},
		{
			name: "unknown modes are kept, unusable starts are not",
			after: func(t *testing.T, l *session.Log) {
				rawStart(t, l, `{"childId":"nomode","provider":"spawn"}`)
				rawStart(t, l, `{"childId":"future","mode":"resident"}`)
				rawStart(t, l, `{"provider":"spawn","mode":"one-shot"}`)
				rawStart(t, l, `{"childId":7}`)
				rawStart(t, l, `[]`)
			},
			want: []string{"nomode unknown", "future unknown"},
		},
		{
			name: "a fork's inherited starts are not its children",
			seed: []string{"inherited-1", "inherited-2"},
			after: func(t *testing.T, l *session.Log) {
				if _, err := l.Append(session.TypeEndSeed, struct{}{}); err != nil {
					t.Fatal(err)
				}
				start(t, l, "own", subagent.ModeOneShot)
			},
			want: []string{"own one-shot"},
		},
		{
			name: "a fork with an empty seed keeps everything",
			seed: []string{},
			after: func(t *testing.T, l *session.Log) {
				start(t, l, "own", subagent.ModeOneShot)
			},
			want: []string{"own one-shot"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := session.Header{Version: session.FormatVersion, ID: "p"}
			var seed []session.Event
			if tt.seed != nil {
				// The parent's log: the fork inherits all of it.
				parent, err := session.NewLog(session.Header{ID: "grandparent"}, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range tt.seed {
					start(t, parent, c, subagent.ModeOneShot)
				}
				seed = parent.Events()
				n := int64(len(seed))
				h.SeedLength = &n
			}
			l, err := session.NewLog(h, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.before != nil {
				tt.before(t, l)
			}
			reg := projection.NewRegistry()
			if err := reg.Register(catalog.Unit(h)); err != nil {
				t.Fatal(err)
			}
			p := reg.Attach(l)
			if tt.after != nil {
				tt.after(t, l)
			}
			entries, mark, ok := projection.GetAs[[]catalog.Entry](p, catalog.Key)
			if !ok {
				t.Fatalf("no %s state", catalog.Key)
			}
			// The watermark covers every event, inherited ones included:
			// skipping them is the fold's decision, not a gap.
			if want := int64(l.Len() - 1); mark != want {
				t.Errorf("watermark %d, want %d", mark, want)
			}
			var got []string
			events := l.Events()
			for _, e := range entries {
				got = append(got, e.ChildID+" "+e.Mode)
				ev := events[e.Seq]
				if ev.Type != session.TypeSubagentStart || e.CreatedAt != ev.Time {
					t.Errorf("%s: seq %d is %s at %d, entry says created at %d", e.ChildID, e.Seq, ev.Type, ev.Time, e.CreatedAt)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("catalog = %q, want %q", got, tt.want)
			}
			// The cold fold and the live unit agree entry for entry.
			if cold := catalog.Fold(h, events); !reflect.DeepEqual(cold, entries) {
				t.Errorf("Fold = %+v, unit = %+v", cold, entries)
			}
		})
	}
}

func TestUnitEntryFields(t *testing.T) {
	h := session.Header{ID: "p"}
	l, err := session.NewLog(h, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Append(session.TypeSubagentStart, subagent.StartEvent{RunID: "r", ChildID: "c", Provider: "fork", Label: "Fix the bug", Mode: subagent.ModeOneShot, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := catalog.Fold(h, l.Events())
	want := []catalog.Entry{{ChildID: "c", CreatedAt: e.Time, Mode: catalog.ModeOneShot, Label: "Fix the bug", Provider: "fork", Seq: 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Fold = %+v, want %+v", got, want)
	}
}
