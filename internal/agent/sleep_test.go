package agent

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestSleep checks the default retry wait on the fake clock: it lasts
// exactly the backoff, and a cancellation ends it at once with the cause.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := sleep(t.Context(), 1500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 1500*time.Millisecond {
			t.Fatalf("slept %v, want exactly 1.5s", d)
		}

		cause := errors.New("user pressed Esc")
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(200*time.Millisecond, func() { cancel(cause) })
		start = time.Now()
		if err := sleep(ctx, time.Hour); err != cause {
			t.Fatalf("err = %v, want the cause", err)
		}
		if d := time.Since(start); d != 200*time.Millisecond {
			t.Fatalf("cancelled after %v, want exactly 200ms", d)
		}
	})
}
