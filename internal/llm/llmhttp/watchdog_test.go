package llmhttp

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestWatchdogFires(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	wd := NewWatchdog(20*time.Millisecond, cancel)
	defer wd.Stop()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog never cancelled")
	}
	if !wd.Fired() || wd.Timeout() != 20*time.Millisecond {
		t.Errorf("Fired = %v, Timeout = %v", wd.Fired(), wd.Timeout())
	}
}

func TestWatchdogStop(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wd := NewWatchdog(20*time.Millisecond, cancel)
	wd.Stop()
	time.Sleep(60 * time.Millisecond)
	if wd.Fired() || ctx.Err() != nil {
		t.Error("a stopped watchdog fired")
	}
}

// TestWatchdogReader: reads that return bytes keep the request alive
// for longer than the timeout in total; empty reads do not count.
func TestWatchdogReader(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	wd := NewWatchdog(100*time.Millisecond, cancel)
	defer wd.Stop()
	r := wd.Reader(iotest.OneByteReader(strings.NewReader("abcdefgh")))
	buf := make([]byte, 4)
	for range 8 {
		time.Sleep(30 * time.Millisecond) // 240 ms in all, each gap well under 100
		if n, err := r.Read(buf); n != 1 || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
	}
	if wd.Fired() || ctx.Err() != nil {
		t.Fatal("watchdog fired despite activity")
	}
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read at end = %d, %v", n, err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog never fired after the reads stopped")
	}
}
