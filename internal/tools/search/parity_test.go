package search

import (
	"fmt"
	"strings"
	"testing"
)

// parityTree exercises what the two backends could disagree on: ignore
// files at several levels and in a nested repository, hidden entries,
// line endings, a missing final newline, empty files, invalid UTF-8,
// empty matches and matches across lines.
func parityTree() map[string]string {
	t := map[string]string{
		".git/info/exclude":    "*.excluded\n",
		".gitignore":           "/build/\n*.tmp\n!keep.tmp\nlogs/\n",
		".config/settings.txt": "alpha = 1\nbeta = 2\n",
		"build/out.txt":        "alpha built\n",
		"keep.tmp":             "alpha kept\n",
		"drop.tmp":             "alpha dropped\n",
		"x.excluded":           "alpha excluded\n",
		"empty.txt":            "",
		"newline.txt":          "\n",
		"nofinal.txt":          "alpha first\nbeta last",
		"crlf.txt":             "alpha one\r\nbeta two\r\n\r\nGAMMA three\r\n",
		"latin1.txt":           "caf\xe9 alpha\n\xff\xfe beta\n",
		"unicode.txt":          "héllo wörld\nHÉLLO again\nend of it",
		"code/main.go":         "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"alpha\")\n\tbeta()\n}\n\nfunc beta() {}\n",
		"code/sub/.gitignore":  "*.md\n!README.md\n",
		"code/sub/README.md":   "# alpha readme\nbegin\nmiddle\nend\n",
		"code/sub/notes.md":    "alpha notes\n",
		"code/sub/logs/l.txt":  "alpha log\n",
		"code/sub/data.txt":    "  trailing space   \nalpha\tbeta\t\nnumbers 123 4567\n",
		"nested/.git/HEAD":     "",
		"nested/.gitignore":    "*.go\n",
		"nested/n.md":          "alpha nested md\n",
		"nested/n.go":          "alpha nested go\n",
		"bin/blob.bin":         "alpha\x00\x01\x02",
		"-dash.txt":            "alpha dash\n",
		"space name.txt":       "beta with space\n",
	}
	var many strings.Builder
	for i := range 60 {
		fmt.Fprintf(&many, "line %d alpha %s\n", i, strings.Repeat("β", i%7))
		if i%5 == 0 {
			many.WriteString("beta\nbeta\n")
		}
	}
	t["many/lines.txt"] = many.String()
	for i := range 12 {
		t[fmt.Sprintf("many/f%02d.txt", i)] = strings.Repeat("alpha beta\n", i+1)
	}
	t["long/min.js"] = strings.Repeat("var a=1;", 300) + "alpha" + strings.Repeat(";b=2", 300) + "\n"
	return t
}

// TestBackendParity runs the same searches with rg and the Go walker and
// requires identical output.
func TestBackendParity(t *testing.T) {
	rg := rgPath(t)
	dir := t.TempDir()
	writeTree(t, dir, parityTree())
	goH := newHarness(t, dir, NewGrep(Options{NoRipgrep: true}))
	rgH := newHarness(t, dir, NewGrep(Options{Ripgrep: rg}))
	type q = map[string]any
	queries := []q{
		{"pattern": "alpha"},
		{"pattern": "beta$"},
		{"pattern": "^beta"},
		{"pattern": `\bbeta\b`},
		{"pattern": "x*"},
		{"pattern": "^"},
		{"pattern": "$"},
		{"pattern": `\s+$`},
		{"pattern": "[0-9]{3,}"},
		{"pattern": "héllo", "-i": true},
		{"pattern": "gamma", "-i": true},
		{"pattern": `\Aalpha`},
		{"pattern": `it\z`},
		{"pattern": "alpha|beta", "head_limit": 7},
		{"pattern": "β{3}"},
		{"pattern": "alpha", "include": "*.md"},
		{"pattern": "alpha", "include": "!*.txt"},
		{"pattern": "alpha", "include": "code/**"},
		{"pattern": "alpha", "include": "*.{go,tmp}"},
		{"pattern": "alpha", "path": "code/sub"},
		{"pattern": "alpha", "path": "nested"},
		{"pattern": "alpha", "path": "build"},
		{"pattern": "alpha", "path": "latin1.txt"},
		{"pattern": `alpha\nbeta`, "multiline": true},
		{"pattern": `begin.*end`, "multiline": true},
		{"pattern": `^beta`, "multiline": true},
		{"pattern": `a\n\n`, "multiline": true},
		{"pattern": `alpha`, "multiline": true, "head_limit": 5},
		{"pattern": `\d+\n\s*beta`, "multiline": true},
		{"pattern": "alpha", "-n": false},
	}
	// Context and limits in content mode, on the queries most likely to
	// disagree: empty matches, text anchors, multiline and many files.
	contextOpts := []q{{"-C": 1}, {"-A": 2}, {"-B": 3, "-A": 1}, {"head_limit": 3, "-A": 2}, {"head_limit": 40, "-C": 2}}
	withContext := map[int]bool{0: true, 4: true, 6: true, 11: true, 13: true, 23: true, 24: true, 26: true, 27: true, 28: true}
	for _, mode := range []string{"files_with_matches", "count", "content"} {
		for i, base := range queries {
			extras := []q{{}}
			if mode == "content" && withContext[i] {
				extras = append(extras, contextOpts...)
			}
			for _, extra := range extras {
				args := q{"output_mode": mode}
				for k, v := range base {
					args[k] = v
				}
				for k, v := range extra {
					args[k] = v
				}
				name := fmt.Sprint(args)
				g := goH.call(t.Context(), t, GrepName, args)
				r := rgH.call(t.Context(), t, GrepName, args)
				if g.IsError || r.IsError {
					t.Errorf("%s: error go=%q rg=%q", name, goH.text(g), rgH.text(r))
					continue
				}
				if gt, rt := goH.text(g), rgH.text(r); gt != rt {
					t.Errorf("%s: backends differ\n%s", name, firstDiff(gt, rt))
				}
			}
		}
	}
}

// firstDiff shows where two outputs part, with a few lines around.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	i := 0
	for i < len(al) && i < len(bl) && al[i] == bl[i] {
		i++
	}
	from := max(0, i-3)
	clip := func(l []string) string { return strings.Join(l[min(from, len(l)):min(i+4, len(l))], "\n") }
	return fmt.Sprintf("at line %d\n--- go\n%s\n--- rg\n%s", i+1, clip(al), clip(bl))
}
