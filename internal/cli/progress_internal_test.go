package cli

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/cli/progress"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestProgressWaitingLineTicks: while a request has produced nothing,
// the stream refreshes its waiting line every tick with the time waited;
// once the answer streams it stops, and finish leaves no goroutine.
func TestProgressWaitingLineTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, err := session.NewLog(session.Header{ID: "s"}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		p := &progressOut{w: &out, r: progress.New(progress.Options{Transient: true}), tick: progressTick}
		finish := streamEvents(log, nil, IO{Stderr: &out}, p)
		if _, err := log.Append(session.TypeStepStart, session.StepRef{Turn: 1, Step: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := log.Append(session.TypeRequestContext, session.RequestContext{Provider: "fake", Model: "m"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*progressTick + progressTick/2)
		synctest.Wait()
		got := out.String()
		for _, want := range []string{"waiting for fake/m… 1s", "waiting for fake/m… 2s", "waiting for fake/m… 3s"} {
			if !strings.Contains(got, want) {
				t.Errorf("missing %q in %q", want, got)
			}
		}
		if _, err := log.Append(session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: 1}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		n := out.Len()
		time.Sleep(5 * progressTick)
		synctest.Wait()
		if out.Len() != n {
			t.Errorf("ticks went on after the first chunk: %q", out.String()[n:])
		}
		finish()
		if g := streamGoroutines(); g != 0 {
			t.Fatalf("%d stream goroutines left", g)
		}
		if !strings.Contains(out.String(), "── 1 step") {
			t.Errorf("no closing line: %q", out.String())
		}
	})
}
