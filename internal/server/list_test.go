package server_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/workspace"
)

type listPage struct {
	Sessions []sessionInfo `json:"sessions"`
	Next     *string       `json:"next"`
}

// walk GETs path page by page, following next, and returns the ids in
// the order received and the size of each page.
func (e *env) walk(path string) (ids []string, sizes []int) {
	e.t.Helper()
	before := ""
	for range 1000 {
		p := path
		if before != "" {
			p += "&before=" + url.QueryEscape(before)
		}
		var page listPage
		e.call("GET", p, nil, 200, &page)
		sizes = append(sizes, len(page.Sessions))
		for _, s := range page.Sessions {
			ids = append(ids, s.Header.ID)
		}
		if page.Next == nil {
			return ids, sizes
		}
		if *page.Next == "" {
			e.t.Fatalf("%s: empty next, want it omitted", p)
		}
		before = *page.Next
	}
	e.t.Fatalf("%s: no last page after 1000", path)
	return nil, nil
}

// TestListSessionsPaged: GET /api/sessions pages by limit (default 200,
// at most 1000) and before; following next through every page gives the
// unpaged listing once each, with cwd, children and workspace filters
// too; bad paging input is INVALID_ARGUMENT.
func TestListSessionsPaged(t *testing.T) {
	e := newEnv(t, "")
	ctx := t.Context()
	dir := filepath.Join(e.cwd, "w")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// 450 sessions in two directories, every ninth a child; many share an
	// update time, so the id decides their order.
	for i := range 450 {
		h := session.Header{Version: session.FormatVersion, ID: fmt.Sprintf("s-%03d", (i*7)%450), CreatedAt: 1_700_000_000_000, Cwd: e.cwd}
		if i%2 == 0 {
			h.Cwd = dir
		}
		if i%9 == 8 {
			h.ParentSession = "s-000"
		}
		if err := e.app.Store.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	var first listPage
	e.call("GET", "/api/sessions?children=1", nil, 200, &first)
	if len(first.Sessions) != 200 || first.Next == nil {
		t.Fatalf("default page: %d sessions, next %v", len(first.Sessions), first.Next)
	}
	all, sizes := e.walk("/api/sessions?children=1&limit=1000")
	if len(all) != 450 || !slices.Equal(sizes, []int{450}) {
		t.Fatalf("one page of 1000: %v", sizes)
	}
	for _, q := range []string{"children=1", "cwd=" + url.QueryEscape(dir), "cwd=" + url.QueryEscape(e.cwd) + "&children=true", "children=0", ""} {
		want, _ := e.walk("/api/sessions?limit=1000&" + q)
		got, sizes := e.walk("/api/sessions?limit=37&" + q)
		if !slices.Equal(got, want) || len(want) == 0 || sizes[0] != 37 {
			t.Fatalf("%s: paged %d ids %v, want %d", q, len(got), sizes, len(want))
		}
	}

	// A workspace: its members first, in its order, then the directory's
	// other top-level sessions, newest first, across pages.
	var ws workspace.Workspace
	e.call("POST", "/api/workspaces", map[string]any{"path": dir}, 201, &ws)
	members := []string{"s-070", "s-014", "s-056", "s-140", "s-028"} // s-056 is a child
	for _, id := range slices.Backward(members) {
		if err := e.reg.Attach(ctx, ws.ID, id); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := e.reg.Get(ctx, ws.ID)
	if err != nil || len(ws.SessionIDs) != len(members) {
		t.Fatalf("members %v, %v", ws.SessionIDs, err)
	}
	top, _ := e.walk("/api/sessions?limit=1000&children=0&cwd=" + url.QueryEscape(dir))
	want := slices.Clone(ws.SessionIDs)
	for _, id := range top {
		if !slices.Contains(want, id) {
			want = append(want, id)
		}
	}
	for _, limit := range []int{1, 2, 3, 50, 1000} {
		got, _ := e.walk(fmt.Sprintf("/api/sessions?workspace=%s&limit=%d", ws.ID, limit))
		if !slices.Equal(got, want) {
			t.Fatalf("workspace, limit %d: %d ids %v…, want %d %v…", limit, len(got), got[:min(8, len(got))], len(want), want[:8])
		}
	}

	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "before=%21%21", "before=eA",
		"workspace=" + ws.ID + "&before=x", "workspace=" + ws.ID + "&before=m.99", "workspace=" + ws.ID + "&before=t.eA"} {
		e.wantError(e.req("GET", "/api/sessions?"+q, nil), 400, "INVALID_ARGUMENT")
	}
}
