package search

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/tool"
)

// writeTree creates files under root. A value is the file's content; a
// key ending in "/" makes an empty directory. Modification times go up
// one second per file in key order from a fixed base, so that
// newest-first results are deterministic.
func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, k := range keys {
		p := filepath.Join(root, filepath.FromSlash(k))
		if strings.HasSuffix(k, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[k]), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// touch sets a file's modification time to base+sec seconds.
func touch(t testing.TB, path string, sec int) {
	t.Helper()
	mt := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sec) * time.Second)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// harness runs the search tools through a real pipeline, the way the
// agent loop does.
type harness struct {
	p   *tool.Pipeline
	cwd string
}

func newHarness(t testing.TB, cwd string, defs ...tool.Definition) *harness {
	t.Helper()
	reg := tool.NewRegistry()
	for _, d := range defs {
		if err := reg.Register("", d); err != nil {
			t.Fatal(err)
		}
	}
	return &harness{p: tool.NewPipeline(reg), cwd: cwd}
}

func (h *harness) call(ctx context.Context, t testing.TB, name string, args any) tool.Result {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	return h.p.Run(ctx, &tool.Call{ID: "c1", Name: name, RawArguments: raw, Cwd: h.cwd})
}

// text is the result's content with the session cwd shown as $ROOT.
func (h *harness) text(r tool.Result) string {
	var b strings.Builder
	for _, bl := range r.Content {
		b.WriteString(bl.Text)
	}
	return strings.ReplaceAll(b.String(), h.cwd, "$ROOT")
}

func code(r tool.Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// rgPath returns the rg on PATH or skips the test.
func rgPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("rg")
	if err != nil {
		t.Skip("rg is not installed")
	}
	return p
}

// backends lists the grep configurations to test: always the Go walker,
// and rg when it is installed (reported as skipped otherwise).
func backends(t *testing.T, base Options) map[string]Options {
	t.Helper()
	goOpts := base
	goOpts.NoRipgrep = true
	out := map[string]Options{"go": goOpts}
	if p, err := exec.LookPath("rg"); err == nil {
		rg := base
		rg.Ripgrep = p
		out["rg"] = rg
	} else {
		t.Log("rg is not installed; only the Go backend is tested")
	}
	return out
}
