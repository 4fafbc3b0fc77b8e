package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

// streamGoroutines counts goroutines started by streamEvents.
func streamGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "cli.streamEvents.func")
}

// TestStreamEventsBlockedWriterLosesNothing: with the stream's writer
// blocked (a pipe nobody reads), appends go on; once the reader drains,
// finish writes every event in seq order and leaves no goroutine.
func TestStreamEventsBlockedWriterLosesNothing(t *testing.T) {
	log, err := session.NewLog(session.Header{ID: "s"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	finish := streamEvents(log, bufio.NewWriterSize(pw, 4<<10), IO{Stderr: &stderr}, nil)
	const n = 20_000 // megabytes of JSON, far past the writer's buffer
	for range n {
		if _, err := log.Append(session.TypeAssistantChunk, map[string]any{"delta": strings.Repeat("x", 64)}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(pr)
		got <- b
	}()
	finish()
	finish() // idempotent
	pw.Close()
	lines := strings.Split(strings.TrimSuffix(string(<-got), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("stream has %d lines, want %d", len(lines), n)
	}
	for i, l := range lines {
		var e session.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Seq != int64(i) {
			t.Fatalf("line %d: seq %d, %v", i, e.Seq, err)
		}
	}
	if g := streamGoroutines(); g != 0 {
		t.Fatalf("%d stream goroutines left after finish", g)
	}
}
