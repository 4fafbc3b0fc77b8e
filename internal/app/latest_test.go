package app

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
)

// TestLatestSessionPages: --continue picks the newest readable top-level
// session of the directory, also when the newest ones (more than a page
// of the listing) cannot be read, and says there is none when none can.
func TestLatestSessionPages(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	t.Setenv("DSH_HOME", home)
	a, err := OpenStore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 40 {
		h := session.Header{Version: session.FormatVersion, ID: fmt.Sprintf("s-%02d", i), CreatedAt: 1, Cwd: cwd}
		if err := a.Store.Create(t.Context(), h); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := a.Store.List(t.Context(), store.ListFilter{Cwd: cwd, TopLevelOnly: true})
	if err != nil || len(entries) != 40 {
		t.Fatalf("%d entries, %v", len(entries), err)
	}
	db, err := sql.Open("sqlite", filepath.Join(home, "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	damage := func(n int) {
		for _, e := range entries[:n] {
			if _, err := db.Exec(`UPDATE sessions SET header = '{' WHERE id = ?`, e.Header.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	damage(25)
	if got, err := a.LatestSession(t.Context(), cwd); err != nil || got != entries[25].Header.ID {
		t.Fatalf("LatestSession = %q, %v; want %s", got, err, entries[25].Header.ID)
	}
	damage(40)
	if got, err := a.LatestSession(t.Context(), cwd); err == nil {
		t.Fatalf("LatestSession = %q with every session damaged", got)
	}
}
