package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/workspace"
)

func TestWorkspaceRoutes(t *testing.T) {
	e := newEnv(t, "")
	feed := e.openSSE(e.req("GET", "/api/events", nil))
	defer feed.close()
	dirA := filepath.Join(e.cwd, "a")
	dirB := filepath.Join(e.cwd, "b")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var a, b, again workspace.Workspace
	e.call("POST", "/api/workspaces", map[string]any{"path": dirA}, 201, &a)
	if a.ID == "" || a.Path != dirA || a.Title != "a" || a.Status != "ok" {
		t.Fatalf("created %+v", a)
	}
	if fe := feedUntil(t, feed, host.FeedWorkspaceChanged); fe.WorkspaceID != a.ID {
		t.Fatalf("feed %+v", fe)
	}
	// Another spelling of the same directory is the same workspace.
	e.call("POST", "/api/workspaces", map[string]any{"path": dirB + "/../a"}, 200, &again)
	if again.ID != a.ID {
		t.Fatalf("second create %+v", again)
	}
	e.call("POST", "/api/workspaces", map[string]any{"path": dirB, "title": "Bee"}, 201, &b)

	var list struct{ Workspaces []workspace.Workspace }
	e.call("GET", "/api/workspaces", nil, 200, &list)
	if len(list.Workspaces) != 2 {
		t.Fatalf("list %+v", list)
	}
	var renamed workspace.Workspace
	e.call("PATCH", "/api/workspaces/"+a.ID, map[string]any{"title": "Ay", "before": ""}, 200, &renamed)
	if renamed.Title != "Ay" {
		t.Fatalf("renamed %+v", renamed)
	}
	if fe := feedUntil(t, feed, host.FeedWorkspaceOrder); fe.WorkspaceID != a.ID {
		t.Fatalf("feed %+v", fe)
	}
	e.call("GET", "/api/workspaces", nil, 200, &list)
	if list.Workspaces[0].ID != b.ID || list.Workspaces[1].ID != a.ID {
		t.Fatalf("after move to the end %+v", list)
	}
	e.call("PATCH", "/api/workspaces/"+a.ID, map[string]any{"before": b.ID}, 200, nil)
	e.call("GET", "/api/workspaces", nil, 200, &list)
	if list.Workspaces[0].ID != a.ID || list.Workspaces[1].ID != b.ID {
		t.Fatalf("after move before b %+v", list)
	}

	// Sessions created in a workspace belong to it, in order.
	s1 := e.create(map[string]any{"workspaceId": a.ID}).Header.ID
	s2 := e.create(map[string]any{"workspaceId": a.ID}).Header.ID
	var got workspace.Workspace
	e.call("PATCH", "/api/workspaces/"+a.ID+"/sessions/"+s2, map[string]any{"before": s1}, 200, &got)
	if len(got.SessionIDs) != 2 || got.SessionIDs[0] != s2 || got.SessionIDs[1] != s1 {
		t.Fatalf("session order %+v", got.SessionIDs)
	}
	// One made by cwd in a registered directory joins it too (at the front).
	s3 := e.create(map[string]any{"cwd": dirA}).Header.ID
	// One that another process made there, unregistered, comes last.
	other, err := e.host.Create(t.Context(), host.CreateRequest{Cwd: dirA})
	if err != nil {
		t.Fatal(err)
	}
	s4 := other.Header.ID
	var sessions struct{ Sessions []sessionInfo }
	e.call("GET", "/api/sessions?workspace="+a.ID, nil, 200, &sessions)
	var order []string
	for _, s := range sessions.Sessions {
		order = append(order, s.Header.ID)
	}
	if want := []string{s3, s2, s1, s4}; !equalStrings(order, want) {
		t.Fatalf("workspace sessions %v, want %v", order, want)
	}
	e.call("GET", "/api/sessions?workspace="+b.ID, nil, 200, &sessions)
	if len(sessions.Sessions) != 0 {
		t.Fatalf("other workspace's sessions %+v", sessions)
	}

	// Error codes.
	e.wantError(e.req("POST", "/api/workspaces", map[string]any{"path": "relative/dir"}), 400, "WORKSPACE_INVALID_PATH")
	e.wantError(e.req("PATCH", "/api/workspaces/nosuch", map[string]any{"title": "x"}), 404, "WORKSPACE_NOT_FOUND")
	e.wantError(e.req("PATCH", "/api/workspaces/"+a.ID, map[string]any{"before": a.ID}), 400, "WORKSPACE_MOVE_INVALID")
	e.wantError(e.req("PATCH", "/api/workspaces/"+a.ID+"/sessions/"+s1, map[string]any{}), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("DELETE", "/api/workspaces/nosuch", nil), 404, "WORKSPACE_NOT_FOUND")
	e.wantError(e.req("PATCH", "/api/workspaces/"+a.ID, map[string]any{"title": ""}), 400, "WORKSPACE_INVALID_TITLE")

	// A missing directory shows in the status; delete removes only the
	// registration.
	if err := os.Remove(dirB); err != nil {
		t.Fatal(err)
	}
	e.call("GET", "/api/workspaces", nil, 200, &list)
	if list.Workspaces[1].ID != b.ID || list.Workspaces[1].Status != "missing-dir" {
		t.Fatalf("missing dir %+v", list.Workspaces[1])
	}
	if got := e.do(e.req("DELETE", "/api/workspaces/"+a.ID, nil), nil); got != 204 {
		t.Fatalf("delete: %d", got)
	}
	if fe := feedUntil(t, feed, host.FeedWorkspaceRemoved); fe.WorkspaceID != a.ID {
		t.Fatalf("feed %+v", fe)
	}
	e.wantError(e.req("DELETE", "/api/workspaces/"+a.ID, nil), 404, "WORKSPACE_NOT_FOUND")
	var one sessionInfo
	e.call("GET", "/api/sessions/"+s1, nil, 200, &one)
}

func TestDirectories(t *testing.T) {
	e := newEnv(t, "")
	for _, d := range []string{"zeta", "alpha", ".hidden", "alpha/inner"} {
		if err := os.Mkdir(filepath.Join(e.cwd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.cwd, "file.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.cwd, "alpha"), filepath.Join(e.cwd, "link")); err != nil {
		t.Fatal(err)
	}
	type listing struct {
		Path, Parent, Home string
		Entries            []struct {
			Name, Path string
			Hidden     bool
		}
	}
	var l listing
	e.call("GET", "/api/directories", nil, 200, &l) // Home is e.cwd here
	if l.Path != e.cwd || l.Home != e.cwd || l.Parent != filepath.Dir(e.cwd) {
		t.Fatalf("listing %+v", l)
	}
	var names []string
	for _, en := range l.Entries {
		names = append(names, en.Name)
		if en.Path != filepath.Join(e.cwd, en.Name) || en.Hidden != (en.Name == ".hidden") {
			t.Errorf("entry %+v", en)
		}
	}
	if want := []string{".hidden", "alpha", "link", "zeta"}; !equalStrings(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	e.call("GET", "/api/directories?path="+filepath.Join(e.cwd, "alpha", ".."), nil, 200, &l)
	if l.Path != e.cwd {
		t.Fatalf("cleaned path %q", l.Path)
	}
	e.wantError(e.req("GET", "/api/directories?path=relative", nil), 400, "INVALID_ARGUMENT")
	e.wantError(e.req("GET", "/api/directories?path="+filepath.Join(e.cwd, "nosuch"), nil), 404, "DIRECTORY_NOT_FOUND")
	e.wantError(e.req("GET", "/api/directories?path="+filepath.Join(e.cwd, "file.txt"), nil), 400, "NOT_A_DIRECTORY")
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestConfig(t *testing.T) {
	e := newEnv(t, "")
	var c struct {
		Models       []string
		DefaultModel string
		Efforts      []string
		Permissions  []string
		Presets      []string
	}
	e.call("GET", "/api/config", nil, 200, &c)
	if c.DefaultModel != "deepseek/deepseek-v4-flash" || !contains(c.Models, c.DefaultModel) {
		t.Errorf("models %v default %q", c.Models, c.DefaultModel)
	}
	if !equalStrings(c.Efforts, []string{"off", "low", "high", "max"}) ||
		!equalStrings(c.Permissions, []string{"read-only", "workspace-write", "auto", "full-access"}) ||
		!contains(c.Presets, "standard") {
		t.Errorf("config %+v", c)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
