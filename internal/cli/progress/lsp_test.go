package progress

import "testing"

func TestLSPCallSummary(t *testing.T) {
	got := callSummary("lsp", `{"operation":"hover","file_path":"shape/shape.go","line":14,"character":16}`)
	if got != "lsp hover shape/shape.go:14:16" {
		t.Fatalf("summary = %q", got)
	}
}
