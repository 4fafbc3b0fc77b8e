package acp

import "testing"

func TestLSPCallTitleAndKind(t *testing.T) {
	args := obj{"operation": "goToDefinition", "file_path": "cmd/app/main.go", "line": float64(11), "character": float64(35)}
	if got := title("lsp", args); got != "lsp goToDefinition cmd/app/main.go:11:35" {
		t.Fatalf("title = %q", got)
	}
	if got := kindOf("lsp"); got != "search" {
		t.Fatalf("kind = %q", got)
	}
}
