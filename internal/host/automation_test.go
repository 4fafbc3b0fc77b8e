package host_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestHeadlessSessionDoesNotWait: an automation's session (Headless) with
// an ask rule is not parked in the approval queue: the ask is unavailable
// at once, the turn completes, and the origin is in the header.
func TestHeadlessSessionDoesNotWait(t *testing.T) {
	f := newFixtureWith(t, host.Config{}, askWrites)
	file := filepath.Join(f.cwd, "out.txt")
	f.srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{writeCall(file, "x\n")}}, llmtest.Response{Text: "could not write"})
	info := f.create(host.CreateRequest{Headless: true, Origin: &host.Origin{Kind: "schedule", Info: session.OriginInfo{ID: "s1", FireTime: "2026-12-01T09:00:00Z"}}})
	id := info.Header.ID
	if info.Header.Origin != "schedule" || info.Header.OriginInfo == nil || info.Header.OriginInfo.ID != "s1" {
		t.Fatalf("header %+v", info.Header)
	}
	f.send(id, "write the file", host.DeliveryQueue)
	out, err := f.h.RunUntilIdle(t.Context(), id)
	if err != nil || out.Text != "could not write" {
		t.Fatalf("run: %+v, %v", out, err)
	}
	if len(f.h.Approvals("")) != 0 {
		t.Error("a headless session's ask waits in the queue")
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("the write ran without approval")
	}
	events, _, err := f.h.Events(t.Context(), id, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := eventsOf(events, session.TypeApprovalDecided); !strings.Contains(d, "unavailable") {
		t.Errorf("approval/decided: %s", d)
	}
	// The stored header keeps the origin.
	h, err := f.app.Store.Header(t.Context(), id)
	if err != nil || h.OriginInfo == nil || h.OriginInfo.FireTime != "2026-12-01T09:00:00Z" {
		t.Errorf("stored header %+v %v", h, err)
	}
}
