package app

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/mcp/mcptest"
)

// TestMCPServersCompose: mcp_servers entries become mcp-server rows with
// their file as source; a profile row with the same id replaces one; two
// rows naming one server are an error.
func TestMCPServersCompose(t *testing.T) {
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	cfg := filepath.Join(home, "config.yaml")
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
mcp_servers:
  - {name: gh, command: github-mcp, tool_timeout: 90s}
  - {name: web, url: "http://127.0.0.1:9/mcp", approval: auto}
profile:
  - id: mcp.web
    module: mcp-server
    config: {name: web, url: "http://127.0.0.1:8/mcp"}
`)
	_, _, comp, err := Compose(Options{})
	if err != nil {
		t.Fatal(err)
	}
	servers, err := MCPServers(comp)
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || servers[0].Name != "gh" || servers[0].ToolTimeout.String() != "1m30s" || servers[0].Source != cfg+" (row mcp.gh)" {
		t.Fatalf("servers %+v", servers)
	}
	if servers[1].URL != "http://127.0.0.1:8/mcp" || servers[1].Approval != "" {
		t.Errorf("the profile row did not replace the entry: %+v", servers[1])
	}
	write(`
mcp_servers:
  - {name: gh, command: a}
profile:
  - {id: other, module: mcp-server, config: {name: gh, command: b}}
`)
	_, _, comp, err = Compose(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MCPServers(comp); err == nil || !strings.Contains(err.Error(), `"gh" is used twice`) {
		t.Errorf("duplicate: %v", err)
	}
	write("profile:\n  - {id: x, module: mcp-server, config: {name: x}}\n")
	if _, _, _, err := Compose(Options{}); err == nil || !strings.Contains(err.Error(), "needs command") {
		t.Errorf("invalid row: %v", err)
	}
}

// TestSessionMCPServers: servers given for one session (the seam for
// servers an ACP client names in session/new) start with the session,
// are offered with the profile's, and stop when the session closes.
func TestSessionMCPServers(t *testing.T) {
	bin := mcptest.Everything(t)
	home := t.TempDir()
	t.Setenv("DSH_HOME", home)
	t.Setenv("DEEPSEEK_API_KEY", "test-key")
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("mcp_servers:\n  - {name: shared, command: "+bin+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Open(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := a.OpenSession(t.Context(), SessionOptions{Cwd: t.TempDir(), MCPServers: []mcp.ServerConfig{{Name: "mine", Command: bin}}})
	if err != nil {
		t.Fatal(err)
	}
	mine, ok := s.MCPServer("mine")
	shared, ok2 := s.MCPServer("shared")
	if !ok || !ok2 || !mine.Connected() || !shared.Connected() {
		t.Fatalf("servers: %v %v", ok, ok2)
	}
	if st := mine.Status(); st.Source != "session" {
		t.Errorf("source %q", st.Source)
	}
	pid := mine.Status().PID
	s.Close()
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the session's server %d outlived the session", pid)
	}
	if !shared.Connected() {
		t.Error("closing a session stopped the process's shared server")
	}
	sharedPID := shared.Status().PID
	a.Close()
	if syscall.Kill(sharedPID, 0) == nil {
		t.Errorf("the shared server %d outlived the app", sharedPID)
	}
}
