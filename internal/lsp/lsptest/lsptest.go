// Package lsptest has what the lsp tests share: finding gopls (skip, or
// fail under DSH_REQUIRE_GOPLS=1 as in CI) and a small Go module.
package lsptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"
)

// Gopls returns the path of gopls or skips the test, saying why; with
// DSH_REQUIRE_GOPLS=1 (set by .ci/run, which installs it) it fails instead.
func Gopls(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("gopls")
	if err != nil {
		msg := "gopls is not on PATH (install: go install golang.org/x/tools/gopls@v0.23.0, as .ci/run does)"
		if os.Getenv("DSH_REQUIRE_GOPLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// ShapeSrc is package shape: an interface, an implementation, and a
// declaration after non-ASCII text on its line ("/* 𝔘é */ func " is 15
// UTF-16 code units but 18 bytes).
const ShapeSrc = `package shape

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

// MainSrc is package main, using shape from a line with non-ASCII text.
const MainSrc = `package main

import (
	"fmt"

	"example.com/m/shape"
)

func main() {
	s := shape.Square{Side: 2}
	fmt.Println("Größe 𝔘:", shape.Total(s), s.Area())
}
`

// Module is a Go module written by NewModule.
type Module struct {
	// Dir is the module root (symlinks resolved); Shape and Main are the
	// absolute paths of shape/shape.go and cmd/app/main.go.
	Dir, Shape, Main string
}

// NewModule writes the module (example.com/m) into a fresh temporary
// directory.
func NewModule(t testing.TB) Module {
	t.Helper()
	return WriteModule(t, t.TempDir())
}

// WriteModule writes the module (example.com/m) into dir.
func WriteModule(t testing.TB, dir string) Module {
	t.Helper()
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	m := Module{Dir: dir, Shape: filepath.Join(dir, "shape", "shape.go"), Main: filepath.Join(dir, "cmd", "app", "main.go")}
	Write(t, filepath.Join(dir, "go.mod"), "module example.com/m\n\ngo 1.22\n")
	Write(t, m.Shape, ShapeSrc)
	Write(t, m.Main, MainSrc)
	return m
}

// Write writes text to path, creating its directory.
func Write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// At returns the 1-based line and 1-based UTF-16 character of the n-th
// (0-based) occurrence of needle in text.
func At(t testing.TB, text, needle string, n int) (line, char int) {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		for off := 0; ; {
			j := strings.Index(l[off:], needle)
			if j < 0 {
				break
			}
			if n == 0 {
				return i + 1, len(utf16.Encode([]rune(l[:off+j]))) + 1
			}
			n--
			off += j + len(needle)
		}
	}
	t.Fatalf("%q not found", needle)
	return 0, 0
}
