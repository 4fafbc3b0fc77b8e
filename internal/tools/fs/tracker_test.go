package fs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestTracker(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := mustHash(t, file)
	tr := NewTracker()
	tests := []struct {
		name    string
		session string
		cur     FileState
		code    string // "" for fresh
	}{
		{"never read", "s0", v1, CodeNotRead},
		{"other session", "s2", v1, CodeNotRead},
		{"fresh", "s1", v1, ""},
		{"changed", "s1", FileState{Size: 2}, CodeStaleRead},
	}
	tr.Record("s1", file, v1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tr.Check(tt.session, file, tt.cur, "edit")
			switch {
			case tt.code == "" && err != nil:
				t.Fatal(err)
			case tt.code != "" && (err == nil || !strings.Contains(err.Error(), tt.code)):
				t.Fatalf("got %v; want %s", err, tt.code)
			}
		})
	}
	tr.Forget("s1")
	if _, ok := tr.Lookup("s1", file); ok {
		t.Fatal("Forget kept the read")
	}
}

func TestTrackerKeyResolvesSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	// A file that does not exist yet gets the same key through the
	// linked directory as it will once it exists.
	before := Key(filepath.Join(dir, "link", "f"))
	if err := os.WriteFile(filepath.Join(real, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "link", "f"), filepath.Join(real, "f"), filepath.Join(dir, "link", ".", "f")} {
		if k := Key(p); k != before {
			t.Errorf("Key(%s) = %s; want %s", p, k, before)
		}
	}
}

// TestTrackerConcurrent hammers one tracker from many goroutines; run
// with -race. Lock must exclude: the counter under it is not atomic.
func TestTrackerConcurrent(t *testing.T) {
	tr := NewTracker()
	counter := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			session := "s" + strconv.Itoa(g%3)
			for i := range 200 {
				path := "/p/" + strconv.Itoa(i%10)
				tr.Record(session, path, FileState{Size: int64(i)})
				tr.Lookup(session, path)
				_ = tr.Check(session, path, FileState{}, "edit")
				unlock := tr.Lock("/shared")
				counter++
				unlock()
				if i%50 == 0 {
					tr.Forget(session)
				}
			}
		})
	}
	wg.Wait()
	if counter != 8*200 {
		t.Fatalf("counter %d", counter)
	}
}
