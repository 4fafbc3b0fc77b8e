package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/search"
)

// Shape of the generated repository: searchDirs³ leaf directories with
// searchPerDir files each hold the visible files; the ignored ones come on
// top, so that the tree holds searchFiles files in all.
const (
	searchDirs    = 10
	searchPerDir  = 8
	searchIgnored = 2000
	searchFiles   = searchDirs*searchDirs*searchDirs*searchPerDir + searchIgnored
)

var searchWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}

// searchSource returns a Go-like file of about 40 lines. One file in 97
// holds the literal "TODO(bench)"; the regex benchmark's handlers are in
// one file in 13.
func searchSource(n int) string {
	var b strings.Builder
	w := func(i int) string { return searchWords[(n*7+i*3)%len(searchWords)] }
	fmt.Fprintf(&b, "package %s\n\nimport (\n\t\"context\"\n\t\"fmt\"\n)\n\n", w(0))
	for f := range 5 {
		name := w(f) + fmt.Sprint(n%100)
		if n%13 == 0 && f == 2 {
			name = strings.ToUpper(w(f)[:1]) + w(f)[1:] + "Handler"
		}
		fmt.Fprintf(&b, "// %s does %s with %s.\nfunc %s(ctx context.Context, v int) (int, error) {\n", name, w(f+1), w(f+2), name)
		fmt.Fprintf(&b, "\tif v < %d {\n\t\treturn 0, fmt.Errorf(\"%s: %%d\", v)\n\t}\n", n%50, w(f+3))
		if n%97 == 0 && f == 4 {
			b.WriteString("\t// TODO(bench): remove this\n")
		}
		fmt.Fprintf(&b, "\treturn v * %d, nil\n}\n\n", f+n%9)
	}
	return b.String()
}

// searchRepo writes the benchmark repository under dir.
func searchRepo(b *testing.B, dir string) {
	b.Helper()
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write(".git/info/exclude", "*.swp\n")
	write(".gitignore", "/build/\nnode_modules/\n*.gen.go\n")
	n := 0
	for i := range searchDirs {
		for j := range searchDirs {
			for k := range searchDirs {
				for f := range searchPerDir {
					rel := fmt.Sprintf("pkg%d/sub%d/leaf%d/file%d.go", i, j, k, f)
					if f == searchPerDir-1 {
						rel = fmt.Sprintf("pkg%d/sub%d/leaf%d/README.md", i, j, k)
					}
					write(rel, searchSource(n))
					n++
				}
			}
		}
	}
	for i := range searchIgnored {
		var rel string
		switch i % 3 {
		case 0:
			rel = fmt.Sprintf("build/out%d/obj%d.go", i%20, i)
		case 1:
			rel = fmt.Sprintf("web/node_modules/pkg%d/index%d.go", i%20, i)
		default:
			rel = fmt.Sprintf("pkg%d/zz_%d.gen.go", i%searchDirs, i)
		}
		write(rel, searchSource(n))
		n++
	}
}

// BenchmarkSearch measures glob and grep calls through the tool pipeline
// on a generated 10,000-file repository (2,000 of the files ignored by
// .gitignore), with both grep backends. The repository is generated once
// for all sub-benchmarks.
func BenchmarkSearch(b *testing.B) {
	dir := b.TempDir()
	searchRepo(b, dir)
	b.Logf("repository: %d files", searchFiles)

	run := func(b *testing.B, def tool.Definition, args string) {
		reg := tool.NewRegistry()
		if err := reg.Register("", def); err != nil {
			b.Fatal(err)
		}
		p := tool.NewPipeline(reg)
		ctx := b.Context()
		var meta json.RawMessage
		for b.Loop() {
			r := p.Run(ctx, &tool.Call{ID: "c", Name: def.Name, RawArguments: args, Cwd: dir})
			if r.IsError {
				b.Fatalf("%s %s: %v", def.Name, args, r.Content)
			}
			meta = r.Meta
		}
		var m struct {
			Total, Files, Lines int
		}
		if err := json.Unmarshal(meta, &m); err == nil {
			b.ReportMetric(float64(max(m.Total, m.Files)), "files")
			if m.Lines > 0 {
				b.ReportMetric(float64(m.Lines), "lines")
			}
		}
	}

	b.Run("glob", func(b *testing.B) {
		run(b, search.NewGlob(search.Options{}), `{"pattern":"**/*.go"}`)
	})
	backends := map[string]search.Options{"go": {NoRipgrep: true}}
	if rg, err := exec.LookPath("rg"); err == nil {
		backends["rg"] = search.Options{Ripgrep: rg}
	} else {
		b.Log("rg is not installed; grep runs with the Go backend only")
	}
	for _, name := range []string{"go", "rg"} {
		opts, ok := backends[name]
		if !ok {
			continue
		}
		b.Run("grep-literal/"+name, func(b *testing.B) {
			run(b, search.NewGrep(opts), `{"pattern":"TODO\\(bench\\)","output_mode":"content"}`)
		})
		b.Run("grep-regex/"+name, func(b *testing.B) {
			run(b, search.NewGrep(opts), `{"pattern":"func [A-Z]\\w+Handler\\(ctx","output_mode":"content"}`)
		})
	}
}
