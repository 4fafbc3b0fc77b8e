package compose

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
)

type inner struct {
	Port int `yaml:"port"`
}

type custom struct{ v string }

func (c *custom) UnmarshalYAML(n *yaml.Node) error { c.v = n.Tag; return nil }

type schema struct {
	Name     string            `yaml:"name"`
	Enabled  bool              `yaml:"enabled"`
	Ratio    float64           `yaml:"ratio"`
	Count    uint              `yaml:"count"`
	Wait     time.Duration     `yaml:"wait"`
	Limit    *time.Duration    `yaml:"limit"`
	Tags     []string          `yaml:"tags"`
	Env      map[string]string `yaml:"env"`
	Limits   map[string]int    `yaml:"limits"`
	Servers  []inner           `yaml:"servers"`
	Raw      yaml.Node         `yaml:"raw"`
	Any      any               `yaml:"any"`
	Own      custom            `yaml:"own"`
	Skipped  string            `yaml:"-"`
	Lower    string
	Embedded inner `yaml:",inline"`
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ doc, want, code string }{
		{"name: 5\nenabled: true\nratio: 1\ncount: 3\nwait: 30s\nlimit: 1m\ntags: [a, 1]\nenv: {A: b}\nlimits: {a: 1}\nservers: [{port: 1}]\nraw: {x: [1]}\nany: [1, {a: b}]\nown: [1]\nlower: x\nport: 8\n", "", ""},
		{"name: ~\nservers: ~\n", "", ""},
		{"enabled: yes please\n", `line 1: key "enabled" must be true or false, not "yes please"`, CodeBadValue},
		{"ratio: high\n", `line 1: key "ratio" must be a number, not "high"`, CodeBadValue},
		{"count: -1\n", `line 1: key "count" must be a whole number, zero or more, not "-1"`, CodeBadValue},
		{"wait: soon\n", `line 1: key "wait" must be a duration such as 30s, 5m or 1h30m, not "soon"`, CodeBadValue},
		{"limit: [1]\n", `line 1: key "limit" must be a duration such as 30s, 5m or 1h30m, not a list`, CodeBadValue},
		{"tags: a\n", `line 1: key "tags" must be a list, not "a"`, CodeBadValue},
		{"tags:\n  - [x]\n", `line 2: key "tags[0]" must be text, not a list`, CodeBadValue},
		{"limits:\n  a: 1\n  b: x\n", `line 3: key "limits.b" must be a whole number, not "x"`, CodeBadValue},
		{"servers:\n  - port: 1\n  - prot: 2\n", `line 3: unknown key "prot" in servers[1]; did you mean "port"?`, CodeUnknownKey},
		{"Name: x\n", `line 1: unknown key "Name"; did you mean "name"?`, CodeUnknownKey},
		{"skipped: x\n", `line 1: unknown key "skipped" (known keys: any, count, enabled, env, limit, limits, lower, name, own, port, ratio, raw, servers, tags, wait)`, CodeUnknownKey},
		{"servers:\n  - &s {port: 1}\n  - <<: *s\n    port: 2\nlimits:\n  <<: [{a: 1}]\n", "", ""},
		{"servers:\n  - &s {port: 1}\n  - <<: [*s, {prot: 2}]\n", `line 3: unknown key "prot" in servers[1]; did you mean "port"?`, CodeUnknownKey},
		{"servers:\n  - &s {port: x}\n  - *s\n", `line 2: key "servers[0].port" must be a whole number, not "x"`, CodeBadValue},
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(tc.doc), &n); err != nil {
			t.Fatal(err)
		}
		err := Check(&n, reflect.TypeFor[schema]())
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.doc, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || err.Error() != tc.want || fe.Code != tc.code {
			t.Errorf("%q: err = %v, want %s (%s)", tc.doc, err, tc.want, tc.code)
		}
	}
}

func TestNearest(t *testing.T) {
	keys := []string{"model", "effort", "max_tokens", "providers", "profile"}
	for in, want := range map[string]string{
		"modle": "model", "Model": "model", "max-tokens": "max_tokens", "maxtokens": "max_tokens",
		"provider": "providers", "efort": "effort", "xyz": "", "profiles": "profile", "m": "",
	} {
		if got := Nearest(in, keys); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
	if Nearest("a", nil) != "" {
		t.Error("no candidates")
	}
}

// TestPlain: decoder errors that reach a user lose Go type names.
func TestPlain(t *testing.T) {
	var v struct {
		N int `yaml:"n"`
	}
	err := Plain(yaml.Unmarshal([]byte("n: [1]\n"), &v))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Line != 1 || goType.MatchString(err.Error()) {
		t.Errorf("Plain(type error) = %v", err)
	}
	dec := yaml.NewDecoder(strings.NewReader("m: 1\n"))
	dec.KnownFields(true)
	err = Plain(dec.Decode(&v))
	if !errors.As(err, &fe) || fe.Code != CodeUnknownKey || err.Error() != `line 1: unknown key "m"` {
		t.Errorf("Plain(unknown field) = %v", err)
	}
	err = Plain(yaml.Unmarshal([]byte("a: [\n"), &v))
	if !errors.As(err, &fe) || fe.Code != CodeSyntax || goType.MatchString(err.Error()) {
		t.Errorf("Plain(syntax) = %v", err)
	}
	other := errors.New("x")
	if Plain(other) != other || Plain(nil) != nil {
		t.Error("Plain changed a non-YAML error")
	}
}
