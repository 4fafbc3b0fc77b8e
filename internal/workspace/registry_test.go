package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
	"github.com/dsh-dev/dsh/internal/workspace"
)

// newRegistry opens a real store in a temporary directory.
func newRegistry(t *testing.T) (*workspace.Registry, *sqlite.Store) {
	t.Helper()
	st := openStore(t, filepath.Join(t.TempDir(), "dsh.db"))
	return workspace.NewRegistry(st), st
}

func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// realDir makes a directory and returns its canonical path (the temporary
// directory may itself sit behind a symlink).
func realDir(t *testing.T, parts ...string) string {
	t.Helper()
	dir := filepath.Join(append([]string{t.TempDir()}, parts...)...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func addSession(t *testing.T, st *sqlite.Store, id, cwd, parent string, created int64) {
	t.Helper()
	h := session.Header{Version: session.FormatVersion, ID: id, CreatedAt: created, Cwd: cwd, ParentSession: parent}
	if err := st.Create(t.Context(), h); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var we *workspace.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("error %v (%T), want code %s", err, err, code)
	}
}

func mustCreate(t *testing.T, r *workspace.Registry, path, title string) workspace.Workspace {
	t.Helper()
	w, _, err := r.Create(t.Context(), path, title)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func ids(ws []workspace.Workspace) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

func TestCreateCollapsesSpellings(t *testing.T) {
	r, _ := newRegistry(t)
	dir := realDir(t, "proj")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, created, err := r.Create(t.Context(), dir, "")
	if err != nil || !created {
		t.Fatalf("Create = %+v, %v, %v", w, created, err)
	}
	if w.Path != dir || w.Title != "proj" || w.Status != workspace.StatusOK || len(w.SessionIDs) != 0 || w.SessionIDs == nil {
		t.Fatalf("created %+v", w)
	}
	for _, spelling := range []string{link, filepath.Join(dir, "sub", ".."), link + "/sub/../", dir + "/"} {
		again, created, err := r.Create(t.Context(), spelling, "other title")
		if err != nil || created || again.ID != w.ID || again.Title != "proj" {
			t.Fatalf("Create(%s) = %+v, %v, %v", spelling, again, created, err)
		}
	}
	if got, ok, err := r.ByPath(t.Context(), link); err != nil || !ok || got.ID != w.ID {
		t.Fatalf("ByPath = %+v, %v, %v", got, ok, err)
	}
	all, err := r.List(t.Context())
	if err != nil || len(all) != 1 {
		t.Fatalf("List = %+v, %v", all, err)
	}
}

func TestCreateRefusesBadPaths(t *testing.T) {
	r, _ := newRegistry(t)
	dir := realDir(t)
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "relative/dir", ".", file, filepath.Join(dir, "missing")} {
		_, _, err := r.Create(t.Context(), p, "")
		wantCode(t, err, workspace.CodeInvalidPath)
	}
	if all, _ := r.List(t.Context()); len(all) != 0 {
		t.Fatalf("bad paths registered: %+v", all)
	}
}

func TestTitlesAndOrder(t *testing.T) {
	r, _ := newRegistry(t)
	a := mustCreate(t, r, realDir(t, "same"), "")
	b := mustCreate(t, r, realDir(t, "same"), "")
	c := mustCreate(t, r, realDir(t, "x"), "  Named  ")
	if a.Title != "same" || b.Title != "same" || c.Title != "Named" {
		t.Fatalf("titles %q %q %q", a.Title, b.Title, c.Title)
	}
	if root := workspace.DefaultTitle("/"); root != "/" {
		t.Fatalf("root title %q", root)
	}
	all, _ := r.List(t.Context())
	if got, want := ids(all), []string{c.ID, b.ID, a.ID}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want newest first %v", got, want)
	}
	renamed, err := r.Rename(t.Context(), a.ID, "same")
	if err != nil || renamed.Title != "same" {
		t.Fatalf("Rename to a repeated title = %+v, %v", renamed, err)
	}
	if renamed, err = r.Rename(t.Context(), c.ID, "New name"); err != nil || renamed.Title != "New name" {
		t.Fatalf("Rename = %+v, %v", renamed, err)
	}
	_, err = r.Rename(t.Context(), c.ID, "  ")
	wantCode(t, err, workspace.CodeInvalidTitle)
	_, err = r.Rename(t.Context(), "nope", "t")
	wantCode(t, err, workspace.CodeNotFound)
}

func TestMissingDirDoesNotMutate(t *testing.T) {
	r, _ := newRegistry(t)
	dir := realDir(t, "gone")
	w := mustCreate(t, r, dir, "")
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(t.Context(), w.ID)
	if err != nil || got.Status != workspace.StatusMissingDir {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	got.Status = w.Status
	if !equal(got, w) {
		t.Fatalf("record changed: %+v, was %+v", got, w)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ = r.Get(t.Context(), w.ID); got.Status != workspace.StatusOK || !equal(got, w) {
		t.Fatalf("after recreating the directory: %+v", got)
	}
}

func equal(a, b workspace.Workspace) bool {
	return a.ID == b.ID && a.Path == b.Path && a.Title == b.Title && a.CreatedAt == b.CreatedAt &&
		a.UpdatedAt == b.UpdatedAt && slices.Equal(a.SessionIDs, b.SessionIDs) && a.Status == b.Status
}

func TestConcurrentCreateOneRecord(t *testing.T) {
	dir := realDir(t, "p")
	// A second store on the same file races like a second process would.
	db := filepath.Join(t.TempDir(), "dsh.db")
	r := workspace.NewRegistry(openStore(t, db))
	r2 := workspace.NewRegistry(openStore(t, db))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		seen    = map[string]bool{}
	)
	for i := range 8 {
		reg := r
		if i%2 == 1 {
			reg = r2
		}
		wg.Go(func() {
			w, c, err := reg.Create(context.Background(), dir, "")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			seen[w.ID] = true
			if c {
				created++
			}
		})
	}
	wg.Wait()
	all, _ := r.List(t.Context())
	if len(all) != 1 || len(seen) != 1 || created != 1 {
		t.Fatalf("%d records, %d ids seen, %d created", len(all), len(seen), created)
	}
}

func TestDeleteRemovesOnlyRegistration(t *testing.T) {
	r, st := newRegistry(t)
	dir := realDir(t, "p")
	w := mustCreate(t, r, dir, "")
	addSession(t, st, "s1", dir, "", 1)
	if err := r.Attach(t.Context(), w.ID, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(t.Context(), w.ID); err != nil {
		t.Fatal(err)
	}
	_, err := r.Get(t.Context(), w.ID)
	wantCode(t, err, workspace.CodeNotFound)
	wantCode(t, r.Delete(t.Context(), w.ID), workspace.CodeNotFound)
	if _, err := st.Header(t.Context(), "s1"); err != nil {
		t.Fatalf("session gone: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("directory gone: %v", err)
	}
	// Registered again, it starts without sessions: deletion dropped them.
	again := mustCreate(t, r, dir, "")
	if again.ID == w.ID || len(again.SessionIDs) != 0 {
		t.Fatalf("re-created %+v", again)
	}
}

func TestAttachChecksCwd(t *testing.T) {
	r, st := newRegistry(t)
	dir, elsewhere := realDir(t, "p"), realDir(t, "q")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	w := mustCreate(t, r, dir, "")
	addSession(t, st, "here", dir, "", 1)
	addSession(t, st, "via-link", link, "", 2)
	addSession(t, st, "there", elsewhere, "", 3)
	wantCode(t, r.Attach(t.Context(), w.ID, "there"), workspace.CodeAttachFailed)
	wantCode(t, r.Attach(t.Context(), w.ID, "unknown"), workspace.CodeAttachFailed)
	wantCode(t, r.Attach(t.Context(), "nope", "here"), workspace.CodeNotFound)
	for _, id := range []string{"here", "via-link", "here"} {
		if err := r.Attach(t.Context(), w.ID, id); err != nil {
			t.Fatalf("Attach %s: %v", id, err)
		}
	}
	// A registration whose session works elsewhere (written past the
	// registry) is not membership: it is left out on read.
	if err := st.AttachSession(t.Context(), w.ID, "there"); err != nil {
		t.Fatal(err)
	}
	got, _ := r.Get(t.Context(), w.ID)
	if want := []string{"via-link", "here"}; !slices.Equal(got.SessionIDs, want) {
		t.Fatalf("sessions %v, want %v", got.SessionIDs, want)
	}
}

func TestMoves(t *testing.T) {
	r, st := newRegistry(t)
	c := mustCreate(t, r, realDir(t, "c"), "")
	b := mustCreate(t, r, realDir(t, "b"), "")
	a := mustCreate(t, r, realDir(t, "a"), "") // order: a b c
	order := func() []string {
		all, err := r.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ids(all)
	}
	steps := []struct {
		id, before string
		want       []string
	}{
		{a.ID, "", []string{b.ID, c.ID, a.ID}},
		{a.ID, b.ID, []string{a.ID, b.ID, c.ID}},
		{c.ID, b.ID, []string{a.ID, c.ID, b.ID}},
		{a.ID, b.ID, []string{c.ID, a.ID, b.ID}},
		{b.ID, b.ID + "x", nil},
		{b.ID, b.ID, nil},
		{"nope", a.ID, nil},
	}
	for _, s := range steps {
		err := r.MoveBefore(t.Context(), s.id, s.before)
		if s.want == nil {
			wantCode(t, err, workspace.CodeMoveInvalid)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := order(); !slices.Equal(got, s.want) {
			t.Fatalf("after moving %s before %q: %v, want %v", s.id, s.before, got, s.want)
		}
	}

	for i, id := range []string{"s3", "s2", "s1"} {
		addSession(t, st, id, a.Path, "", int64(i))
		if err := r.Attach(t.Context(), a.ID, id); err != nil {
			t.Fatal(err)
		}
	}
	sessions := func() []string {
		w, err := r.Get(t.Context(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return w.SessionIDs
	}
	if got := sessions(); !slices.Equal(got, []string{"s1", "s2", "s3"}) {
		t.Fatalf("attached %v, want newest first", got)
	}
	if err := r.MoveSessionBefore(t.Context(), a.ID, "s3", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := r.MoveSessionBefore(t.Context(), a.ID, "s1", ""); err != nil {
		t.Fatal(err)
	}
	if got := sessions(); !slices.Equal(got, []string{"s3", "s2", "s1"}) {
		t.Fatalf("moved %v", got)
	}
	wantCode(t, r.MoveSessionBefore(t.Context(), a.ID, "s1", "s1"), workspace.CodeMoveInvalid)
	wantCode(t, r.MoveSessionBefore(t.Context(), a.ID, "s9", ""), workspace.CodeMoveInvalid)
	wantCode(t, r.MoveSessionBefore(t.Context(), a.ID, "s1", "s9"), workspace.CodeMoveInvalid)
	wantCode(t, r.MoveSessionBefore(t.Context(), "nope", "s1", ""), workspace.CodeNotFound)
}

func TestBootstrapOnce(t *testing.T) {
	r, st := newRegistry(t)
	older, newer := realDir(t, "older"), realDir(t, "newer")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(older, link); err != nil {
		t.Fatal(err)
	}
	addSession(t, st, "o1", older, "", 100)
	addSession(t, st, "n1", newer, "", 200)
	addSession(t, st, "o2", link, "", 300) // the newest, spelled through a symlink
	addSession(t, st, "child", newer, "n1", 400)
	addSession(t, st, "gone", filepath.Join(newer, "deleted"), "", 500)
	addSession(t, st, "relative", "rel", "", 600)
	if err := r.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	all, err := r.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Path != older || all[1].Path != newer {
		t.Fatalf("bootstrapped %+v", all)
	}
	if !slices.Equal(all[0].SessionIDs, []string{"o2", "o1"}) || !slices.Equal(all[1].SessionIDs, []string{"n1"}) {
		t.Fatalf("sessions %v %v", all[0].SessionIDs, all[1].SessionIDs)
	}
	if all[0].Title != "older" {
		t.Fatalf("title %q", all[0].Title)
	}
	// Once per store: a second run, even with new directories, does nothing.
	addSession(t, st, "late", realDir(t, "late"), "", 700)
	if err := r.Delete(t.Context(), all[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := workspace.NewRegistry(st).Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, _ := r.List(t.Context())
	if len(after) != 1 || after[0].ID != all[0].ID {
		t.Fatalf("second bootstrap changed the registry: %+v", after)
	}
}

func TestBootstrapKeepsRegistered(t *testing.T) {
	r, st := newRegistry(t)
	dir, other := realDir(t, "p"), realDir(t, "q")
	w := mustCreate(t, r, dir, "Mine")
	addSession(t, st, "s1", dir, "", 1)
	addSession(t, st, "s2", other, "", 2)
	if err := r.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	all, _ := r.List(t.Context())
	if len(all) != 2 || all[0].Path != other || all[1].ID != w.ID || all[1].Title != "Mine" ||
		!slices.Equal(all[1].SessionIDs, []string{"s1"}) {
		t.Fatalf("registry %+v", all)
	}
}

func TestResolvePrefix(t *testing.T) {
	r, _ := newRegistry(t)
	w := mustCreate(t, r, realDir(t, "p"), "")
	if id, err := r.Resolve(t.Context(), w.ID[:6]); err != nil || id != w.ID {
		t.Fatalf("Resolve = %q, %v", id, err)
	}
	_, err := r.Resolve(t.Context(), "zz")
	wantCode(t, err, workspace.CodeNotFound)
	_, err = r.Resolve(t.Context(), "")
	wantCode(t, err, workspace.CodeNotFound)
}
