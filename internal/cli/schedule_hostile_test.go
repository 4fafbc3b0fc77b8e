package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
)

// TestScheduleListHostile: a schedule whose prompt and directory name
// carry terminal escapes and newlines is listed on one line with them
// shown as "?", and a stored row that cannot be read is named on stderr
// (exit 1) while the others are still listed, and can be removed. Before,
// the escapes reached the terminal raw, and one bad row made list, rm and
// the runner fail for every schedule.
func TestScheduleListHostile(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.cwd, "evil\x1b]0;pwned\x07\nrow\u202e")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prompt := "\x1b[2J\x1b[31mwipe the screen\r\x1b]8;;http://x\x07"
	if out, errOut, code := e.dsh("", "schedule", "add", "--every", "1h", "--cwd", dir, "--prompt", prompt); code != 0 {
		t.Fatalf("schedule add: %d %s %s", code, out, errOut)
	}
	// A nonexistent or relative directory is refused with a clear error.
	for _, bad := range []string{filepath.Join(e.cwd, "missing"), "rel"} {
		if _, errOut, code := e.dsh("", "schedule", "add", "--every", "1h", "--cwd", bad, "--prompt", "p"); code == 0 || !strings.Contains(errOut, "dsh schedule add:") {
			t.Errorf("--cwd %q: %d %s", bad, code, errOut)
		}
	}
	out, errOut, code := e.dsh("", "schedule", "list")
	if code != 0 || strings.ContainsAny(out, "\x1b\x07\r\u202e") || strings.Count(out, "\n") != 2 || !strings.Contains(out, "?[2J?[31mwipe the screen") {
		t.Fatalf("schedule list: %d %q %s", code, out, errOut)
	}

	st, err := sqlite.Open(t.Context(), filepath.Join(e.home, "dsh.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSchedule(t.Context(), store.ScheduleRecord{ID: "damaged", Data: []byte(`{"spec":{"kind":"sunrise"}}`), CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.dsh("", "schedule", "list")
	if code != 1 || !strings.Contains(out, "wipe the screen") || !strings.Contains(errOut, "schedule damaged cannot be read") {
		t.Fatalf("list with a damaged row: %d %q %s", code, out, errOut)
	}
	if out, errOut, code := e.dsh("", "schedule", "rm", "damaged"); code != 0 || !strings.Contains(out, "schedule damaged removed") {
		t.Fatalf("rm of the damaged row: %d %q %s", code, out, errOut)
	}
	if out, errOut, code = e.dsh("", "schedule", "list", "--json"); code != 0 || !strings.Contains(out, "wipe the screen") {
		t.Fatalf("list after rm: %d %q %s", code, out, errOut)
	}
}
