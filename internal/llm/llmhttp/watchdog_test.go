package llmhttp

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"
)

// The watchdog tests run in a synctest bubble: time is fake and only
// advances when every goroutine in the bubble is blocked, so they assert
// exact durations whatever the machine's load.

func TestWatchdogFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		wd := NewWatchdog(20*time.Millisecond, cancel)
		defer wd.Stop()
		<-ctx.Done()
		if d := time.Since(start); d != 20*time.Millisecond {
			t.Errorf("fired after %v, want exactly 20ms", d)
		}
		if !wd.Fired() || wd.Timeout() != 20*time.Millisecond {
			t.Errorf("Fired = %v, Timeout = %v", wd.Fired(), wd.Timeout())
		}
	})
}

func TestWatchdogStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		wd := NewWatchdog(20*time.Millisecond, cancel)
		time.Sleep(19 * time.Millisecond)
		wd.Stop()
		time.Sleep(time.Hour)
		synctest.Wait()
		if wd.Fired() || ctx.Err() != nil {
			t.Error("a stopped watchdog fired")
		}
	})
}

// TestWatchdogReader: reads that return bytes keep the request alive
// for longer than the timeout in total; empty reads do not count, and the
// watchdog fires exactly one timeout after the last byte.
func TestWatchdogReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		wd := NewWatchdog(100*time.Millisecond, cancel)
		defer wd.Stop()
		r := wd.Reader(iotest.OneByteReader(strings.NewReader("abcdefgh")))
		buf := make([]byte, 4)
		for range 8 {
			// 8 x 99ms: far past the timeout in all, each gap just under it.
			time.Sleep(99 * time.Millisecond)
			if n, err := r.Read(buf); n != 1 || err != nil {
				t.Fatalf("Read = %d, %v", n, err)
			}
		}
		last := time.Now()
		if wd.Fired() || ctx.Err() != nil {
			t.Fatal("watchdog fired despite activity")
		}
		if n, err := r.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("Read at end = %d, %v", n, err)
		}
		<-ctx.Done()
		if d := time.Since(last); d != 100*time.Millisecond {
			t.Fatalf("fired %v after the last byte, want exactly 100ms", d)
		}
	})
}
