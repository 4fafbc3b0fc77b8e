package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/tool"
)

func TestToolTimeoutsModule(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	cfg := "profile:\n  - id: timeouts\n    module: tool-timeouts\n    config:\n      default: 45s\n      tools: {read: 10s, bash: 20m}\n"
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, comp, err := Compose(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var def *timeoutsDef
	for _, e := range comp.Entries {
		if v, ok := e.Value.(timeoutsDef); ok {
			def = &v
		}
	}
	if def == nil {
		t.Fatal("the tool-timeouts row was not composed")
	}
	p := tool.NewPipeline(tool.NewRegistry())
	if err := def.apply(&env{pipe: p}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		def  tool.Definition
		want time.Duration
	}{
		{tool.Definition{Name: "glob"}, 45 * time.Second},
		{tool.Definition{Name: "web_fetch", Timeout: 2 * time.Minute}, 2 * time.Minute},
		{tool.Definition{Name: "read"}, 10 * time.Second},
		{tool.Definition{Name: "bash", Timeout: 11 * time.Minute}, 20 * time.Minute},
	} {
		if got := p.Timeout(&c.def); got != c.want {
			t.Errorf("%s: %v, want %v", c.def.Name, got, c.want)
		}
	}

	for _, bad := range []string{"default: -1s", "tools: {read: 0s}"} {
		cfg := "profile:\n  - id: timeouts\n    module: tool-timeouts\n    config: {" + bad + "}\n"
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := Compose(Options{}); err == nil || !strings.Contains(err.Error(), "tool-timeouts") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}
