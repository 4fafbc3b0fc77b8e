package sqlite

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestInboxRefsThroughTheStore: a log whose user/message references the
// inbox is stored and exported with the prompt once, and every read path
// (Load, Inspect, ReadFrom from any seq, import) hands back the message
// whole, equal to what the live log held.
func TestInboxRefsThroughTheStore(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	mustCreate(t, st, "s")
	log, err := session.NewLog(hdr("s"), nil, st)
	if err != nil {
		t.Fatal(err)
	}
	prompt := llm.Message{ID: "m1", Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock("the stored-once prompt")}, Source: llm.Source{Kind: "user"}}
	sp, err := log.Append(session.TypeInboxSpliced, session.InboxSpliced{Target: session.TargetNextTurn, Inserted: []llm.Message{prompt}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error {
			_, err := log.Append(session.TypeInboxSpliced, session.InboxSpliced{Target: session.TargetNextTurn, RemovedCount: 1, Inserted: []llm.Message{}})
			return err
		},
		func() error { _, err := log.Append(session.TypeTurnStart, session.TurnStart{Turn: 1}); return err },
		func() error {
			_, err := log.Append(session.TypeStepStart, session.StepRef{Turn: 1, Step: 1})
			return err
		},
		func() error {
			_, err := log.Append(session.TypeUserMessage, prompt, session.Surface(), session.FromInbox(session.InboxRef{Seq: sp.Seq}))
			return err
		},
		func() error { _, err := log.Append(session.TypeStepEnd, session.StepRef{Turn: 1, Step: 1}); return err },
		func() error {
			_, err := log.Append(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.TurnEndReason{Kind: session.EndCompleted}})
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	live := log.Events()

	out := exportString(t, st, "s")
	if n := strings.Count(out, "the stored-once prompt"); n != 1 {
		t.Errorf("the export holds the prompt %d times:\n%s", n, out)
	}
	_, loaded, err := st.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := session.NewLog(hdr("s"), loaded, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resumed.Events(), live) {
		t.Error("a log resumed from Load differs from the live one")
	}
	if _, got, err := st.Inspect(ctx, "s"); err != nil || !reflect.DeepEqual(got, live) {
		t.Errorf("Inspect differs from the live log (%v)", err)
	}
	for _, from := range []int64{0, 4, 5} {
		got, err := st.ReadFrom(ctx, "s", from)
		if err != nil || !reflect.DeepEqual(got, live[from:]) {
			t.Errorf("ReadFrom(%d) differs from the live log (%v)", from, err)
		}
	}

	dst, _ := newStore(t)
	if _, err := dst.Import(ctx, strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	if _, got, err := dst.Inspect(ctx, "s"); err != nil || !reflect.DeepEqual(got, live) {
		t.Errorf("the imported session differs from the live log (%v)", err)
	}
}
