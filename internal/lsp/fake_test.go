package lsp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

func fakeManager(t *testing.T, f fixture, mode string, request time.Duration) *Manager {
	t.Helper()
	m, err := New(Options{Workspace: f.dir, Servers: map[string]ServerConfig{".go": fakeCommand(mode)}, StartTimeout: 5 * time.Minute, RequestTimeout: request})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestServerEncodingUTF8: a server that chose UTF-8 positions receives
// byte columns and its byte columns come back as UTF-16 characters.
func TestServerEncodingUTF8(t *testing.T) {
	f := newFixture(t)
	m := fakeManager(t, f, "utf8", 5*time.Minute)
	l, c := at(t, shapeSrc, "Total", 0) // character 16: byte 18 (0-based)
	a, err := m.Do(context.Background(), Query{Op: OpHover, Path: f.shape, Line: l, Character: c})
	if err != nil {
		t.Fatal(err)
	}
	if want := "```go\nat 13:18\n```\n\nplain text"; a.Hover != want {
		t.Fatalf("hover = %q, want %q", a.Hover, want)
	}
	a, err = m.Do(context.Background(), Query{Op: OpDefinition, Path: f.shape, Line: l, Character: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Places) != 1 || a.Places[0].Line != l || a.Places[0].Character != c || !strings.Contains(a.Places[0].Text, "func Total") {
		t.Fatalf("definition = %+v, want %d:%d", a.Places, l, c)
	}
}

// TestServerCrashIsUnavailableThenRestarts: a server dying mid-request is
// LSP_UNAVAILABLE with its stderr, and the next call starts a new one.
func TestServerCrashIsUnavailableThenRestarts(t *testing.T) {
	f := newFixture(t)
	m := fakeManager(t, f, "crash", 5*time.Minute)
	q := Query{Op: OpDefinition, Path: f.shape, Line: 1, Character: 1}
	_, err := m.Do(context.Background(), q)
	le := wantCode(t, err, CodeUnavailable)
	if !strings.Contains(le.Message, "fake server: boom") {
		t.Fatalf("message = %q", le.Message)
	}
	_, err = m.Do(context.Background(), q)
	wantCode(t, err, CodeUnavailable)
}

func TestServerRequestTimeoutAndError(t *testing.T) {
	f := newFixture(t)
	m := fakeManager(t, f, "hang", 100*time.Millisecond)
	_, err := m.Do(context.Background(), Query{Op: OpReferences, Path: f.shape, Line: 1, Character: 1})
	le := wantCode(t, err, CodeTimeout)
	if !strings.Contains(le.Message, "textDocument/references") {
		t.Fatalf("message = %q", le.Message)
	}
	m = fakeManager(t, f, "error", 5*time.Minute)
	_, err = m.Do(context.Background(), Query{Op: OpImplementation, Path: f.shape, Line: 1, Character: 1})
	le = wantCode(t, err, CodeRequestFailed)
	if !strings.Contains(le.Message, "no identifier found") {
		t.Fatalf("message = %q", le.Message)
	}
	// The caller's own cancellation is not coded: it is the context's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Do(ctx, Query{Op: OpHover, Path: f.shape, Line: 1, Character: 1}); err != context.Canceled {
		t.Fatalf("cancelled query = %v", err)
	}
}

// TestRootsPerModule: two modules under one workspace get one server each;
// Close stops both.
func TestRootsPerModule(t *testing.T) {
	f := newFixture(t)
	other := filepath.Join(f.dir, "tools", "x.go")
	write(t, filepath.Join(f.dir, "tools", "go.mod"), "module example.com/tools\n")
	write(t, other, "package tools\n")
	cfg := fakeCommand("utf8")
	cfg.RootMarkers = []string{"go.work", "go.mod"}
	m, err := New(Options{Workspace: f.dir, Servers: map[string]ServerConfig{".go": cfg}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.rootFor(cfg, other); got != filepath.Join(f.dir, "tools") {
		t.Fatalf("root of tools/x.go = %s", got)
	}
	if got := m.rootFor(cfg, f.shape); got != f.dir {
		t.Fatalf("root of shape.go = %s", got)
	}
	for _, p := range []string{f.shape, f.main, other} {
		if _, err := m.Do(context.Background(), Query{Op: OpHover, Path: p, Line: 1, Character: 1}); err != nil {
			t.Fatal(err)
		}
	}
	pids := m.Pids()
	if len(pids) != 2 {
		t.Fatalf("servers = %v, want two", pids)
	}
	m.Close()
	for _, pid := range pids {
		if !proctest.WaitExit(pid, time.Minute) {
			t.Fatalf("server %d still runs after Close", pid)
		}
	}
}

// TestServerProtocolViolation: a server that writes a frame that is not
// JSON is cut off and reported unavailable, naming the violation.
func TestServerProtocolViolation(t *testing.T) {
	f := newFixture(t)
	m := fakeManager(t, f, "garbage", 5*time.Minute)
	_, err := m.Do(context.Background(), Query{Op: OpHover, Path: f.shape, Line: 1, Character: 1})
	le := wantCode(t, err, CodeUnavailable)
	if !strings.Contains(le.Message, "last protocol error") || !strings.Contains(le.Message, "not JSON") {
		t.Fatalf("message = %q", le.Message)
	}
}

// TestConcurrentQueriesShareOneServer: queries racing on a fresh manager
// start one server and all get their answers.
func TestConcurrentQueriesShareOneServer(t *testing.T) {
	f := newFixture(t)
	m := fakeManager(t, f, "utf8", 5*time.Minute)
	errs := make(chan error, 8)
	for i := range 8 {
		path := f.shape
		if i%2 == 1 {
			path = f.main
		}
		go func() {
			_, err := m.Do(context.Background(), Query{Op: Operations[i%len(Operations)], Path: path, Line: 1, Character: 1})
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if pids := m.Pids(); len(pids) != 1 {
		t.Fatalf("servers = %v, want one", pids)
	}
}

// TestOpenDocumentsClosedWhenGoneOrOverTheCap: a deleted open file is
// closed on the next query; beyond maxOpenDocs the least recently queried
// one is.
func TestOpenDocumentsClosedWhenGoneOrOverTheCap(t *testing.T) {
	f := newFixture(t)
	m := fakeManager(t, f, "utf8", 5*time.Minute)
	hover := func(p string) {
		t.Helper()
		if _, err := m.Do(context.Background(), Query{Op: OpHover, Path: p, Line: 1, Character: 1}); err != nil {
			t.Fatal(err)
		}
	}
	open := func() map[string]bool {
		out := map[string]bool{}
		for _, e := range m.servers {
			for _, d := range e.s.docs {
				out[d.path] = true
			}
		}
		return out
	}
	gone := filepath.Join(f.dir, "gone.go")
	write(t, gone, "package m\n")
	hover(gone)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	hover(f.shape)
	if docs := open(); docs[gone] || !docs[f.shape] || len(docs) != 1 {
		t.Fatalf("open documents = %v", docs)
	}
	var paths []string
	for i := range maxOpenDocs + 1 {
		p := filepath.Join(f.dir, "many", fmt.Sprintf("f%02d.go", i))
		write(t, p, "package many\n")
		paths = append(paths, p)
		hover(p)
	}
	docs := open()
	if len(docs) != maxOpenDocs || docs[f.shape] || !docs[paths[len(paths)-1]] {
		t.Fatalf("%d open documents, shape.go open %v", len(docs), docs[f.shape])
	}
}
