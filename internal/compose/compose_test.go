package compose

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

type limits struct {
	Max  int    `yaml:"max"`
	Mode string `yaml:"mode"`
}

func registry(t *testing.T) *Registry {
	r := NewRegistry()
	for _, m := range []Module{
		{Name: "limits", Decode: func(n *yaml.Node) (any, error) { return Decode(n, limits{Max: 10, Mode: "a"}) }},
		{Name: "flag", Decode: func(n *yaml.Node) (any, error) { return Decode(n, struct{}{}) }},
	} {
		if err := r.Register(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register(Module{Name: "flag", Decode: func(*yaml.Node) (any, error) { return nil, nil }}); err == nil {
		t.Error("duplicate module accepted")
	}
	return r
}

func rows(t *testing.T, doc string) []Row {
	rs, err := ParseRows([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestComposeLayers(t *testing.T) {
	r := registry(t)
	base := Layer{Source: "base", Rows: rows(t, `
- id: a
  module: limits
- id: b
  module: limits
  config: {max: 5}
- id: c
  module: flag
`)}
	home := Layer{Source: "config.yaml", Rows: rows(t, `
- id: b
  module: limits
  config: {mode: z}
- id: c
  module: flag
  disabled: true
- id: d
  module: flag
`)}
	c, err := r.Compose(base, home)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range c.Entries {
		got = append(got, fmt.Sprintf("%s=%v@%s", e.ID, e.Value, e.Source))
	}
	// b is replaced whole: its base max: 5 is gone, the default returns.
	if want := "a={10 a}@base b={10 z}@config.yaml d={}@config.yaml"; strings.Join(got, " ") != want {
		t.Errorf("entries %v\nwant %s", got, want)
	}
	if len(c.Rows) != 4 || !c.Rows[2].Disabled {
		t.Errorf("rows %+v", c.Rows)
	}
	var b strings.Builder
	if err := c.Dump(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# from base\n- id: a", "# from config.yaml\n- id: b", "mode: z", "disabled: true"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, b.String())
		}
	}
}

// goType matches what must not reach a user: Go type names and YAML tags.
var goType = regexp.MustCompile(`\b(int|int64|float64|string|bool)\b|!!|\w+\.[A-Z]\w*|go-yaml`)

func TestComposeErrorsNameRowAndFile(t *testing.T) {
	r := registry(t)
	for _, tc := range []struct{ doc, want string }{
		{"- id: x\n  module: nope\n", `patch.yaml, line 1: profile row "x": unknown module "nope" (known: flag, limits)`},
		{"- id: x\n  module: limit\n", `patch.yaml, line 1: profile row "x": unknown module "limit"; did you mean "limits"?`},
		{"- id: y\n  module: limits\n  config: {maks: 1}\n", `patch.yaml, line 3: profile row "y" (module limits): unknown key "maks" (known keys: max, mode)`},
		{"- id: y\n  module: limits\n  config:\n    max: 1\n    Mdoe: b\n", `patch.yaml, line 5: profile row "y" (module limits): unknown key "Mdoe"; did you mean "mode"?`},
		{"- id: z\n  module: limits\n  config: {max: many}\n", `patch.yaml, line 3: profile row "z" (module limits): key "max" must be a whole number, not "many"`},
		{"- id: z\n  module: limits\n  config: [1]\n", `patch.yaml, line 3: profile row "z" (module limits): the configuration must be a mapping of keys to values, not a list`},
		{"- id: z\n  module: limits\n  config: {max: [1]}\n", `patch.yaml, line 3: profile row "z" (module limits): key "max" must be a whole number, not a list`},
		{"- module: flag\n", "patch.yaml, line 1: profile row \"\" (module flag): the row has no id"},
	} {
		_, err := r.Compose(Layer{Source: "patch.yaml", Rows: rows(t, tc.doc)})
		var re *RowError
		if !errors.As(err, &re) || err.Error() != tc.want {
			t.Errorf("%q: err = %v, want %q", tc.doc, err, tc.want)
		}
		if goType.MatchString(err.Error()) {
			t.Errorf("%q: a Go type name in %q", tc.doc, err)
		}
	}
	// A disabled row with an unknown module is fine: it never runs.
	if _, err := r.Compose(Layer{Source: "p", Rows: rows(t, "- id: x\n  module: nope\n  disabled: true\n")}); err != nil {
		t.Error(err)
	}
}

func TestPatchFile(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list.yaml")
	mapping := filepath.Join(dir, "map.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(list, []byte("- id: a\n  module: flag\n"), 0o600)
	_ = os.WriteFile(mapping, []byte("profile:\n  - id: b\n    module: flag\n"), 0o600)
	_ = os.WriteFile(bad, []byte("profile:\n  - id: b\n    modul: flag\n"), 0o600)
	for path, id := range map[string]string{list: "a", mapping: "b"} {
		l, err := PatchFile(path)
		if err != nil || len(l.Rows) != 1 || l.Rows[0].ID != id || l.Source != path {
			t.Errorf("PatchFile(%s) = %+v %v", path, l, err)
		}
	}
	if _, err := PatchFile(bad); err == nil || err.Error() != bad+`, line 3: unknown key "modul" in profile[0]; did you mean "module"?` {
		t.Errorf("bad patch error = %v", err)
	}
	_ = os.WriteFile(bad, []byte("- id: a\n  module: [flag\n"), 0o600)
	var fe *FieldError
	if _, err := PatchFile(bad); !errors.As(err, &fe) || fe.Code != CodeSyntax || !strings.HasPrefix(err.Error(), bad+", line ") || strings.Contains(err.Error(), "go-yaml") {
		t.Errorf("malformed patch error = %v", err)
	}
}
