package app

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/compose"
)

// TestBuiltinRowsAreBaseYAML checks that the generated built-in rows are
// exactly what parsing base.yaml gives (nodes, lines, columns, styles):
// it fails when base.yaml changes without `go generate ./internal/app`.
func TestBuiltinRowsAreBaseYAML(t *testing.T) {
	data, err := os.ReadFile("base.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := compose.ParseRows(data)
	if err != nil {
		t.Fatal(err)
	}
	got := builtinRows()
	if len(got) != len(want) {
		t.Fatalf("%d generated rows, base.yaml has %d: run go generate ./internal/app", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("row %d (%s, base.yaml line %d) differs from base.yaml's: run go generate ./internal/app", i, want[i].ID, want[i].Line)
		}
	}
}

// TestBuiltinRowsAreFresh checks that each call builds its own nodes: a
// composition that keeps or changes a node must not reach the next one.
func TestBuiltinRowsAreFresh(t *testing.T) {
	a, b := builtinRows(), builtinRows()
	for i := range a {
		if len(a[i].Config.Content) > 0 && a[i].Config.Content[0] == b[i].Config.Content[0] {
			t.Fatalf("row %s: two calls share a node", a[i].ID)
		}
	}
	a[0].Config.Content = nil
	if reflect.DeepEqual(a[0], builtinRows()[0]) {
		t.Fatal("changing one call's row changed the next call's")
	}
}

// TestComposeBuiltinEqualsParsed composes the built-in layer from the
// generated rows and from base.yaml parsed at run time: the same profile.
func TestComposeBuiltinEqualsParsed(t *testing.T) {
	data, err := os.ReadFile("base.yaml")
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := compose.ParseRows(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := modules().Compose(compose.Layer{Source: "built-in", Rows: parsed})
	if err != nil {
		t.Fatal(err)
	}
	got, err := modules().Compose(compose.Layer{Source: "built-in", Rows: builtinRows()})
	if err != nil {
		t.Fatal(err)
	}
	var g, w strings.Builder
	if err := got.Dump(&g); err != nil {
		t.Fatal(err)
	}
	if err := want.Dump(&w); err != nil {
		t.Fatal(err)
	}
	if g.String() != w.String() || !reflect.DeepEqual(got.Rows, want.Rows) {
		t.Fatal("the generated built-in rows compose to another profile than base.yaml's")
	}
}
