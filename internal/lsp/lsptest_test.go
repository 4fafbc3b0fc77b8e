package lsp

import (
	"testing"

	"github.com/dsh-dev/dsh/internal/lsp/lsptest"
)

const (
	shapeSrc = lsptest.ShapeSrc
	mainSrc  = lsptest.MainSrc
)

type fixture struct{ dir, shape, main string }

func newFixture(t *testing.T) fixture {
	m := lsptest.NewModule(t)
	return fixture{dir: m.Dir, shape: m.Shape, main: m.Main}
}

func goplsPath(t *testing.T) string { return lsptest.Gopls(t) }

func write(t *testing.T, path, text string) { t.Helper(); lsptest.Write(t, path, text) }

func at(t *testing.T, text, needle string, n int) (int, int) {
	t.Helper()
	return lsptest.At(t, text, needle, n)
}
