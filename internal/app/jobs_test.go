package app

import (
	"context"
	"io"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/session"
)

// TestWaitJobsOutlastsNoticesThatDidNotWake: a job that ends with a
// notice that does not wake the agent (here skipped: the session has no
// live agent; in dsh run, injected into a busy agent's step) must not end
// the wait while another job still runs. Found by the crash test: a
// headless run with a background bash job and a background subagent
// returned on the bash job's stale delivery and cancelled the subagent.
func TestWaitJobsOutlastsNoticesThatDidNotWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newJobHub()
		log, err := session.NewLog(session.Header{ID: "s1"}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := &Session{Log: log, jobs: h}
		h.mu.Lock()
		h.done["s1"] = make(chan jobs.Delivery, 16)
		h.mu.Unlock()

		release := make(chan struct{})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		defer unblock() // a failing check must not leave the job blocked
		start := func(block bool) {
			_, err := h.reg.Start(t.Context(), jobs.Spec{Kind: "bash", Owner: "s1", Run: func(ctx context.Context, _ io.Writer) (jobs.Outcome, error) {
				if block {
					select {
					case <-release:
					case <-ctx.Done():
					}
				}
				return jobs.Exited(0), nil
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
		start(true)
		start(false)
		synctest.Wait() // the quick job ended; its delivery is buffered

		type res struct {
			woken bool
			err   error
		}
		done := make(chan res, 1)
		go func() {
			w, err := s.WaitJobs(t.Context())
			done <- res{w, err}
		}()
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("WaitJobs returned %+v while a job still runs", r)
		default:
		}
		unblock()
		r := <-done
		if r.err != nil || r.woken {
			t.Fatalf("WaitJobs = %+v, want not woken (nothing woke the agent)", r)
		}
		if h.running("s1") {
			t.Fatal("WaitJobs returned while a job still runs")
		}
	})
}
