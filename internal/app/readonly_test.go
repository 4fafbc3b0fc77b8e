package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/store"
)

// TestOpenStoreIgnoresTheConfiguration: a broken config.yaml stops Open
// but not OpenStore, whose store lists sessions.
func TestOpenStoreIgnoresTheConfiguration(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("modle: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), Options{}); err == nil {
		t.Fatal("Open accepted a broken config.yaml")
	}
	a, err := OpenStore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if entries, err := a.Store.List(t.Context(), store.ListFilter{}); err != nil || len(entries) != 0 {
		t.Errorf("List = %v, %v", entries, err)
	}
	if a.Home != home || a.Composition != nil {
		t.Errorf("app %+v", a)
	}
}

func TestDefaultModel(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	if got := DefaultModel(nil); got != provider.DefaultModel {
		t.Errorf("DefaultModel(nil) = %q", got)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("model: openai/gpt-x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, comp, err := Compose(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := DefaultModel(comp); got != "openai/gpt-x" {
		t.Errorf("DefaultModel = %q", got)
	}
}
