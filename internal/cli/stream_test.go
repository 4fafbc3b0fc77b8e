package cli_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
)

// TestJSONConsumerThatDoesNotReadDoesNotStallTheRun: dsh run --json with
// a stdout pipe nobody drains. The stream is megabytes (far more than a
// pipe holds), yet the agent streams the whole first answer, runs its
// tool and sends the second request while nobody reads; once drained,
// the stream is every event of the run, in order, then run/result.
func TestJSONConsumerThatDoesNotReadDoesNotStallTheRun(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(
		llmtest.Response{Text: strings.Repeat("abcdefgh", 40_000), ChunkRunes: 8, ToolCalls: []llmtest.ToolCall{bashCall("echo tool ran")}},
		llmtest.Response{Text: "all done"},
	)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c := e.cmd(ctx, "run", "--json", "--permission", "full-access", "go")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Nobody reads stdout until the second request has arrived: the
	// agent must get there on its own.
	if err := e.srv.WaitRequests(ctx, 2); err != nil {
		t.Fatalf("the run stalled behind its unread stdout: %v\n%s", err, stderr.String())
	}
	out, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("dsh run: %v\n%s", err, stderr.String())
	}
	if len(out) < 1<<20 {
		t.Fatalf("stream is only %d bytes; the test needs more than a pipe holds", len(out))
	}
	events, res := parseJSONRun(t, string(out))
	if res.Status != "completed" || res.Text != "all done" {
		t.Fatalf("run/result = %+v", res)
	}
	_, stored, _ := exportEvents(t, e, res.SessionID)
	if len(events) != len(stored) {
		t.Fatalf("stream has %d events, the log %d", len(events), len(stored))
	}
	for i, ev := range events {
		if ev.Seq != int64(i) || ev.Type != stored[i].Type {
			t.Fatalf("stream event %d = %s@%d, log has %s@%d", i, ev.Type, ev.Seq, stored[i].Type, stored[i].Seq)
		}
	}
	sessiontest.CheckBalanced(t, stored)
}
