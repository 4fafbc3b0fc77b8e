package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/workspace"
)

func listWorkspaces(t *testing.T, e *env) []workspace.Workspace {
	t.Helper()
	out, stderr, code := e.dsh("", "workspace", "list", "--json")
	var ws []workspace.Workspace
	if code != 0 || json.Unmarshal([]byte(out), &ws) != nil {
		t.Fatalf("workspace list: %d %s %s", code, out, stderr)
	}
	return ws
}

// TestWorkspaceCommands drives dsh workspace as a user would: the first
// use registers the directory of the stored session, add collapses
// spellings and refuses what is not a directory, ids may be abbreviated,
// and rm keeps the directory and its sessions.
func TestWorkspaceCommands(t *testing.T) {
	e := newEnv(t)
	e.srv.Enqueue(llmtest.Response{Text: "done"})
	runPrompts(t, e, "say done")
	sessions := listSessions(t, e)
	if len(sessions) != 1 {
		t.Fatalf("sessions %+v", sessions)
	}

	// Bootstrap: the session's directory is a workspace holding it.
	ws := listWorkspaces(t, e)
	if len(ws) != 1 || ws[0].Path != e.cwd || ws[0].Title != filepath.Base(e.cwd) ||
		!slices.Equal(ws[0].SessionIDs, []string{sessions[0].ID}) || ws[0].Status != "ok" {
		t.Fatalf("bootstrapped %+v", ws)
	}

	proj := filepath.Join(e.cwd, "proj")
	if err := os.MkdirAll(filepath.Join(proj, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(proj, link); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := e.dsh("", "workspace", "add", "--title", "Project", "proj")
	if code != 0 || !strings.HasPrefix(out, "added workspace ") {
		t.Fatalf("add: %d %q %q", code, out, stderr)
	}
	for _, spelling := range []string{link, proj + "/sub/..", "./proj/"} {
		out, stderr, code := e.dsh("", "workspace", "add", spelling)
		if code != 0 || !strings.Contains(out, "already registers "+proj) {
			t.Fatalf("add %s: %d %q %q", spelling, code, out, stderr)
		}
	}
	if err := os.WriteFile(filepath.Join(e.cwd, "file.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"file.txt", "missing", filepath.Join(e.cwd, "missing")} {
		_, stderr, code := e.dsh("", "workspace", "add", bad)
		if code != 2 || !strings.Contains(stderr, "WORKSPACE_INVALID_PATH") {
			t.Fatalf("add %s: %d %q", bad, code, stderr)
		}
	}
	if _, stderr, code := e.dsh("", "workspace", "add"); code != 2 || !strings.Contains(stderr, "exactly one directory") {
		t.Fatalf("add without a path: %d %q", code, stderr)
	}

	ws = listWorkspaces(t, e)
	if len(ws) != 2 || ws[0].Path != proj || ws[0].Title != "Project" || len(ws[0].SessionIDs) != 0 {
		t.Fatalf("after add %+v", ws)
	}
	projID := ws[0].ID

	out, _, code = e.dsh("", "workspace", "list")
	if code != 0 || !strings.Contains(out, projID[:8]+"  Project") || !strings.Contains(out, "ok") {
		t.Fatalf("table: %d\n%s", code, out)
	}

	if out, stderr, code := e.dsh("", "workspace", "rename", projID[:6], "Parser"); code != 0 || !strings.Contains(out, `"Parser"`) {
		t.Fatalf("rename: %d %q %q", code, out, stderr)
	}
	if _, stderr, code := e.dsh("", "workspace", "rename", "zzz", "x"); code != 2 || !strings.Contains(stderr, "WORKSPACE_NOT_FOUND") {
		t.Fatalf("rename unknown: %d %q", code, stderr)
	}
	if _, stderr, code := e.dsh("", "workspace", "rename", projID, " "); code != 2 || !strings.Contains(stderr, "WORKSPACE_INVALID_TITLE") {
		t.Fatalf("rename blank: %d %q", code, stderr)
	}

	// A missing directory is shown, not forgotten.
	if err := os.RemoveAll(proj); err != nil {
		t.Fatal(err)
	}
	if ws = listWorkspaces(t, e); ws[0].Status != "missing-dir" || ws[0].Title != "Parser" {
		t.Fatalf("missing directory %+v", ws[0])
	}

	home := ws[1]
	if out, stderr, code := e.dsh("", "workspace", "rm", home.ID[:8]); code != 0 || !strings.Contains(out, "removed workspace "+home.ID) {
		t.Fatalf("rm: %d %q %q", code, out, stderr)
	}
	if _, stderr, code := e.dsh("", "workspace", "rm", home.ID); code != 2 || !strings.Contains(stderr, "WORKSPACE_NOT_FOUND") {
		t.Fatalf("rm again: %d %q", code, stderr)
	}
	// The registration went; the session and the directory stayed, and
	// the bootstrap does not bring the workspace back.
	if ws = listWorkspaces(t, e); len(ws) != 1 || ws[0].ID != projID {
		t.Fatalf("after rm %+v", ws)
	}
	if got := listSessions(t, e); len(got) != 1 || got[0].ID != sessions[0].ID {
		t.Fatalf("sessions after rm %+v", got)
	}
	if _, err := os.Stat(e.cwd); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := e.dsh("", "workspace", "frob"); code != 2 || !strings.Contains(stderr, `unknown subcommand "frob"`) {
		t.Fatalf("unknown subcommand: %d %q", code, stderr)
	}
}
