package catalog_test

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

func TestFormatTree(t *testing.T) {
	row := func(id, parent string, depth int, mode, activity, label string) catalog.Row {
		return catalog.Row{ID: id, ParentID: parent, Depth: depth, Mode: mode, Activity: activity, Label: label, Provider: "spawn"}
	}
	broken := row("bad", "root", 1, "one-shot", "inactive", "")
	broken.Provider = ""
	broken.Diagnostic, broken.Reason = catalog.DiagnosticCorrupt, "session bad: unsupported format\nat seq 0"
	tests := []struct {
		name string
		rows []catalog.Row
		want string
	}{
		{"empty", nil, "no subagents\n"},
		{
			name: "tree",
			rows: []catalog.Row{
				row("a", "root", 1, "one-shot", "running", "Find the bug"),
				row("a1", "a", 2, "one-shot", "inactive", "Read the logs"),
				row("a11", "a1", 3, "unknown", "inactive", ""),
				row("a2", "a", 2, "continuable", "inactive", "say \"hi\"\x1b[2J"),
				broken,
				row("c", "root", 1, "one-shot", "inactive", "Last"),
				row("c1", "c", 2, "one-shot", "inactive", "Leaf"),
			},
			want: "root\n" +
				"├─ a  one-shot  running  \"Find the bug\"  (spawn)\n" +
				"│  ├─ a1  one-shot  inactive  \"Read the logs\"  (spawn)\n" +
				"│  │  └─ a11  unknown  inactive  (spawn)\n" +
				"│  └─ a2  continuable  inactive  \"say \\\"hi\\\"\\x1b[2J\"  (spawn)\n" +
				"├─ bad  one-shot  inactive  [corrupt: session bad: unsupported format at seq 0]\n" +
				"└─ c  one-shot  inactive  \"Last\"  (spawn)\n" +
				"   └─ c1  one-shot  inactive  \"Leaf\"  (spawn)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := catalog.FormatTree(tt.rows); got != tt.want {
				t.Errorf("FormatTree:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestFormatTreeOfListing renders a real listing, so the tree and the
// walker agree on depth and order.
func TestFormatTreeOfListing(t *testing.T) {
	w := newWorld(t)
	w.stored("root", "", "a", "b")
	w.stored("a", "root", "a1")
	w.stored("a1", "a")
	w.stored("b", "root")
	rows, err := catalog.ListDescendants(t.Context(), w.deps(), "root")
	if err != nil {
		t.Fatal(err)
	}
	want := "root\n" +
		"├─ a  one-shot  inactive  \"task a\"  (spawn)\n" +
		"│  └─ a1  one-shot  inactive  \"task a1\"  (spawn)\n" +
		"└─ b  one-shot  inactive  \"task b\"  (spawn)\n"
	if got := catalog.FormatTree(rows); got != want {
		t.Errorf("FormatTree:\n%s\nwant:\n%s", got, want)
	}
}
