package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBaseProfileComposes guards the embedded base profile: it must
// compose, and every preset must name only tools a row provides.
func TestBaseProfileComposes(t *testing.T) {
	t.Setenv("DSH_HOME", t.TempDir())
	_, _, comp, err := Compose(Options{})
	if err != nil {
		t.Fatal(err)
	}
	provided := map[string]bool{}
	presets := map[string]presetDef{}
	for _, e := range comp.Entries {
		switch v := e.Value.(type) {
		case toolPlugin:
			provided[v.name] = true
		case presetDef:
			presets[v.Name] = v
		}
	}
	for _, name := range []string{"standard", "minimal"} {
		p, ok := presets[name]
		if !ok {
			t.Fatalf("preset %s missing", name)
		}
		for _, tl := range p.Tools {
			if !provided[tl] {
				t.Errorf("preset %s names %s, which no row provides", name, tl)
			}
		}
	}
	var b strings.Builder
	if err := comp.Dump(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "id: tool.bash") {
		t.Errorf("dump:\n%s", b.String())
	}
}

func TestTopLevelModelKeysConflictWithModelRow(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("effort: low\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, comp, err := Compose(Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &App{Composition: comp}
	if md := a.modelDefaults(); md.Default != "deepseek/deepseek-v4-flash" || md.Effort != "low" {
		t.Errorf("model defaults %+v", md)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("model: openai/gpt-4.1\nprofile:\n  - id: model\n    module: model\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Compose(Options{}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("conflict error = %v", err)
	}
}
