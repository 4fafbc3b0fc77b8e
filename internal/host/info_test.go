package host_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestForkExportListAndErrors: a fork is a new live session seeded with
// the parent's finished turns that continues on its own; export writes
// the JSONL of the stored log; listings filter by cwd and mark children;
// bad input gets stable codes.
func TestForkExportListAndErrors(t *testing.T) {
	f := newFixture(t, host.Config{})
	f.srv.Enqueue(llmtest.Response{Text: "parent answer", Usage: &llmtest.Usage{Input: 1200, Output: 30}}, llmtest.Response{Text: "fork answer"})
	parent := f.create(host.CreateRequest{Title: "the parent"})
	id := parent.Header.ID
	f.send(id, "one", host.DeliveryQueue)
	f.runIdle(id)
	live, err := f.h.Get(t.Context(), id)
	if err != nil || live.State != "completed" || live.Status != host.StatusIdle || live.Turns != 1 || live.Usage.OutputTokens != 30 || live.Context == nil || live.Context.UsedTokens < 1200 {
		t.Fatalf("parent after its turn: %+v, %v", live, err)
	}
	// A stored session's usage and context pressure are folded from its log.
	f.dispose(id)
	stored, err := f.h.Get(t.Context(), id)
	if err != nil || stored.Live || stored.Usage != live.Usage || stored.Context == nil || stored.Context.UsedTokens != live.Context.UsedTokens {
		t.Fatalf("stored parent: %+v (live was %+v), %v", stored, live, err)
	}

	fork, err := f.h.Fork(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !fork.Child || fork.ParentID != id || fork.Header.Origin != "fork" || fork.Header.SeedLength == nil || !fork.Live {
		t.Fatalf("fork %+v", fork)
	}
	f.send(fork.Header.ID, "two", host.DeliveryQueue)
	out, err := f.h.RunUntilIdle(t.Context(), fork.Header.ID)
	if err != nil || out.Text != "fork answer" {
		t.Fatalf("fork run %+v, %v", out, err)
	}
	f.dispose(fork.Header.ID)
	events := f.stored(fork.Header.ID)
	if err := sessiontest.Check(events); err != nil {
		t.Fatal(err)
	}
	if seed := *fork.Header.SeedLength; events[seed].Type != session.TypeEndSeed {
		t.Fatalf("event after the seed is %s", events[seed].Type)
	}

	var buf bytes.Buffer
	if err := f.h.Export(t.Context(), id, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !strings.Contains(lines[0], `"type":"session"`) || len(lines) != len(f.stored(id))+1 {
		t.Fatalf("export: %d lines, first %s", len(lines), lines[0])
	}

	top, err := f.h.List(t.Context(), host.ListFilter{Cwd: f.cwd})
	if err != nil || len(top) != 1 || top[0].Header.ID != id || top[0].Title != "the parent" {
		t.Fatalf("top-level list %+v, %v", top, err)
	}
	all, err := f.h.List(t.Context(), host.ListFilter{IncludeChildren: true})
	if err != nil || len(all) != 2 || all[0].Header.ID != fork.Header.ID {
		t.Fatalf("list with children %+v, %v", all, err)
	}
	if other, _ := f.h.List(t.Context(), host.ListFilter{Cwd: t.TempDir()}); len(other) != 0 {
		t.Fatalf("list of another cwd: %+v", other)
	}
	if rows, err := f.h.Tree(t.Context(), id); err != nil || len(rows) != 0 {
		t.Fatalf("tree of a parent without subagents: %+v, %v", rows, err)
	}
	if jobs := f.h.Jobs(id); len(jobs) != 0 {
		t.Fatalf("jobs %+v", jobs)
	}

	for name, err := range map[string]error{
		"unknown id": func() error { _, err := f.h.Get(t.Context(), "nope"); return err }(),
		"bad cwd":    func() error { _, err := f.h.Create(t.Context(), host.CreateRequest{Cwd: "/no/such/dir"}); return err }(),
		"bad preset": func() error {
			_, err := f.h.Create(t.Context(), host.CreateRequest{Cwd: f.cwd, Permission: "yolo"})
			return err
		}(),
		"bad delivery":  f.h.Send(t.Context(), id, userText("x"), "later"),
		"empty message": f.h.Send(t.Context(), id, userText(""), ""),
		"bad after":     func() error { _, _, err := f.h.Events(t.Context(), id, -2, 0); return err }(),
	} {
		want := host.CodeInvalidArgument
		if name == "unknown id" {
			want = host.CodeSessionNotFound
		}
		if got := host.ErrorCode(err); got != want {
			t.Errorf("%s: %v (code %s), want %s", name, err, got, want)
		}
	}
}
