package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

func TestSpill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	reg := NewRegistry()
	big := strings.Repeat("line of output\n", 10_000) // 150 KB
	for name, out := range map[string]string{"big": big, "small": "ok"} {
		out := out
		if err := reg.Register("", Definition{
			Name: name, Description: name, Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(context.Context, *Call) (Result, error) { return Text(out), nil },
		}); err != nil {
			t.Fatal(err)
		}
	}
	p := NewPipeline(reg)
	p.UsePostExecute(Spill(dir, 50_000))

	r := p.Run(t.Context(), &Call{ID: "c/1", Name: "big", SessionID: "../evil", RawArguments: "{}"})
	text := r.Content[0].Text
	if len(text) > 5_000 || !strings.Contains(text, "150000 bytes") {
		t.Fatalf("spilled content = %.200q (len %d)", text, len(text))
	}
	path := text[strings.Index(text, dir):]
	path = path[:strings.Index(path, " ")]
	if filepath.Dir(filepath.Dir(path)) != dir {
		t.Fatalf("spill file %s escapes %s", path, dir)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != big {
		t.Fatalf("spill file content mismatch: %v", err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	if r := p.Run(t.Context(), &Call{ID: "c2", Name: "small", SessionID: "s", RawArguments: "{}"}); r.Content[0].Text != "ok" {
		t.Errorf("small result changed: %+v", r.Content)
	}
	// Images survive a spill.
	kept := keepImages([]llm.Block{llm.TextBlock("x"), {Type: llm.BlockImage, MediaType: "image/png", Data: "AA=="}}, "y")
	if len(kept) != 2 || kept[1].Type != llm.BlockImage {
		t.Errorf("keepImages = %+v", kept)
	}
}
