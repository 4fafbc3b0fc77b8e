package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/leakcheck"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
)

func TestMain(m *testing.M) {
	// Bash commands run under the sandbox helper, which is this binary.
	sandbox.RunHelperIfRequested()
	os.Exit(leakcheck.Run(m))
}

func needSandbox(t *testing.T) {
	if _, err := sandbox.Default().Backend(); err != nil {
		t.Skipf("no sandbox backend on this machine: %v", err)
	}
}

// fixture is a host over a real app (real SQLite in a temp DSH_HOME) and
// the scripted fake model.
type fixture struct {
	t   *testing.T
	srv *llmtest.Server
	app *app.App
	h   *host.Host
	cwd string
}

func newFixture(t *testing.T, cfg host.Config) *fixture {
	t.Helper()
	return newFixtureWith(t, cfg, "")
}

// askWrites is a profile whose rule asks before every write tool call.
const askWrites = `
profile:
  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: write, action: ask, reason: "writes need a yes"}
`

// newFixtureWith writes configYAML as $DSH_HOME/config.yaml first.
func newFixtureWith(t *testing.T, cfg host.Config, configYAML string) *fixture {
	t.Helper()
	srv := llmtest.New()
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if configYAML != "" {
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(configYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DSH_HOME", home)
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	t.Setenv("DEEPSEEK_BASE_URL", srv.URL())
	a, err := app.Open(t.Context(), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.App = a
	if cfg.Holder == "" {
		cfg.Holder = "host test"
	}
	h, err := host.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, srv: srv, app: a, h: h, cwd: t.TempDir()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("host close: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("app close: %v", err)
		}
	})
	return f
}

func (f *fixture) create(r host.CreateRequest) host.Info {
	f.t.Helper()
	if r.Cwd == "" {
		r.Cwd = f.cwd
	}
	info, err := f.h.Create(f.t.Context(), r)
	if err != nil {
		f.t.Fatalf("create: %v", err)
	}
	return info
}

func (f *fixture) send(id, text string, d host.Delivery) {
	f.t.Helper()
	if err := f.h.Send(f.t.Context(), id, llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)}}, d); err != nil {
		f.t.Fatalf("send: %v", err)
	}
}

// until reads s until an event satisfies stop (returned with all read).
func until(t *testing.T, s *host.Stream, stop func(session.Event) bool) []session.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var all []session.Event
	for {
		batch, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("stream after %d events: %v", len(all), err)
		}
		for _, e := range batch {
			all = append(all, e)
			if stop(e) {
				return all
			}
		}
	}
}

func isType(typ string) func(session.Event) bool {
	return func(e session.Event) bool { return e.Type == typ }
}

func countType(events []session.Event, typ string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func userText(s string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(s)}}
}
