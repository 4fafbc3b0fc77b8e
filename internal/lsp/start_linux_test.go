package lsp

import (
	"context"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

func TestStartTimeout(t *testing.T) {
	f := newFixture(t)
	// A server that never answers initialize.
	m, err := New(Options{Workspace: f.dir, StartTimeout: 50 * time.Millisecond, Servers: map[string]ServerConfig{
		".go": {Command: []string{"sleep", "1000.4242"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Do(context.Background(), Query{Op: OpHover, Path: f.shape, Line: 1, Character: 1})
	wantCode(t, err, CodeTimeout)
	m.Close()
	if left := proctest.Survivors("1000.4242", time.Minute); len(left) > 0 {
		t.Fatalf("the server that timed out is still running: %v", left)
	}
}
