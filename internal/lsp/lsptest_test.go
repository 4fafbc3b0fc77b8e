package lsp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goplsPath returns gopls or skips the test: CI installs it (.ci/run).
func goplsPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("gopls")
	if err != nil {
		t.Skip("gopls is not installed (go install golang.org/x/tools/gopls@v0.23.0; .ci/run does it)")
	}
	return p
}

// fixture is a small Go module: package shape with an interface and an
// implementation, a declaration after non-ASCII text on its line, and a
// main package that uses them from a line with non-ASCII text too.
type fixture struct {
	dir, shape, main string
}

const shapeSrc = `package shape

// Shape is anything with an area.
type Shape interface {
	Area() float64
}

// Square is a Shape.
type Square struct{ Side float64 }

// Area returns the square's area.
func (s Square) Area() float64 { return s.Side * s.Side }

/* 𝔘é */ func Total(xs ...Shape) float64 {
	t := 0.0
	for _, x := range xs {
		t += x.Area()
	}
	return t
}
`

const mainSrc = `package main

import (
	"fmt"

	"example.com/m/shape"
)

func main() {
	s := shape.Square{Side: 2}
	fmt.Println("Größe 𝔘:", shape.Total(s), s.Area())
}
`

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	f := fixture{dir: dir, shape: filepath.Join(dir, "shape", "shape.go"), main: filepath.Join(dir, "cmd", "app", "main.go")}
	write(t, filepath.Join(dir, "go.mod"), "module example.com/m\n\ngo 1.22\n")
	write(t, f.shape, shapeSrc)
	write(t, f.main, mainSrc)
	return f
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// at returns the 1-based line and 1-based UTF-16 character of the n-th
// (0-based) occurrence of needle in text.
func at(t *testing.T, text, needle string, n int) (int, int) {
	t.Helper()
	for i, line := range Lines(text) {
		for off := 0; ; {
			j := strings.Index(line[off:], needle)
			if j < 0 {
				break
			}
			if n == 0 {
				return i + 1, UTF16Len(line[:off+j]) + 1
			}
			n--
			off += j + len(needle)
		}
	}
	t.Fatalf("%q not found", needle)
	return 0, 0
}
