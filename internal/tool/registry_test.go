package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

const objSchema = `{"type":"object","properties":{"x":{"type":"string"}}}`

func defNamed(name, desc string) Definition {
	return Definition{
		Name:        name,
		Description: desc,
		Parameters:  json.RawMessage(objSchema),
		Execute: func(ctx context.Context, c *Call) (Result, error) {
			return Text(desc), nil
		},
	}
}

func TestRegisterValidation(t *testing.T) {
	exec := func(ctx context.Context, c *Call) (Result, error) { return Text(""), nil }
	tests := []struct {
		name    string
		def     Definition
		wantErr string
	}{
		{"ok", Definition{Name: "ok_tool-1", Parameters: json.RawMessage(objSchema), Execute: exec}, ""},
		{"ok whitespace schema", Definition{Name: "ws", Parameters: json.RawMessage("{\n \"type\": \"object\"\n}"), Execute: exec}, ""},
		{"empty name", Definition{Parameters: json.RawMessage(objSchema), Execute: exec}, "empty"},
		{"bad char", Definition{Name: "a.b", Parameters: json.RawMessage(objSchema), Execute: exec}, "character"},
		{"too long", Definition{Name: strings.Repeat("a", 65), Parameters: json.RawMessage(objSchema), Execute: exec}, "longer"},
		{"nil execute", Definition{Name: "x", Parameters: json.RawMessage(objSchema)}, "Execute is nil"},
		{"nil params", Definition{Name: "x", Execute: exec}, "empty"},
		{"array params", Definition{Name: "x", Parameters: json.RawMessage(`[]`), Execute: exec}, "not a JSON object"},
		{"null params", Definition{Name: "x", Parameters: json.RawMessage(`null`), Execute: exec}, "not a JSON object"},
		{"invalid json", Definition{Name: "x", Parameters: json.RawMessage(`{"type":`), Execute: exec}, "not a JSON object"},
		{"no type", Definition{Name: "x", Parameters: json.RawMessage(`{"properties":{}}`), Execute: exec}, `"type": "object"`},
		{"string type", Definition{Name: "x", Parameters: json.RawMessage(`{"type":"string"}`), Execute: exec}, `"type": "object"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewRegistry().Register("", tt.def)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Register: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Register error = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRegisterDuplicatesAndShadowing(t *testing.T) {
	r := NewRegistry()
	mustRegister(t, r, "", defNamed("read", "global read"))
	mustRegister(t, r, "", defNamed("bash", "global bash"))
	if err := r.Register("", defNamed("read", "again")); err == nil {
		t.Fatal("duplicate global registration succeeded")
	}
	// A scope may shadow a global name, once.
	mustRegister(t, r, "child", defNamed("read", "child read"))
	if err := r.Register("child", defNamed("read", "again")); err == nil {
		t.Fatal("duplicate scoped registration succeeded")
	}
	// Another scope is an independent layer.
	mustRegister(t, r, "other", defNamed("read", "other read"))

	lookups := []struct {
		scope, name, wantDesc string
		found                 bool
	}{
		{"", "read", "global read", true},
		{"child", "read", "child read", true},
		{"other", "read", "other read", true},
		{"child", "bash", "global bash", true},
		{"nobody", "read", "global read", true},
		{"child", "missing", "", false},
	}
	for _, l := range lookups {
		d, ok := r.Lookup(l.scope, l.name)
		if ok != l.found || (ok && d.Description != l.wantDesc) {
			t.Errorf("Lookup(%q,%q) = %v,%v; want %q,%v", l.scope, l.name, d, ok, l.wantDesc, l.found)
		}
	}

	if !r.Unregister("child", "read") {
		t.Fatal("Unregister(child, read) = false")
	}
	if r.Unregister("child", "read") {
		t.Fatal("second Unregister(child, read) = true")
	}
	if d, _ := r.Lookup("child", "read"); d.Description != "global read" {
		t.Fatalf("after unregistering the scoped tool, lookup = %q, want the global one", d.Description)
	}
	if r.Unregister("", "nope") {
		t.Fatal("Unregister of a missing tool = true")
	}
}

func TestSchemasVisibleSortedStable(t *testing.T) {
	r := NewRegistry()
	for _, n := range []string{"zeta", "alpha", "Mid", "beta", "alpha_2"} {
		mustRegister(t, r, "", defNamed(n, "global "+n))
	}
	mustRegister(t, r, "s", defNamed("beta", "scoped beta"))
	mustRegister(t, r, "s", defNamed("gamma", "scoped gamma"))

	tests := []struct {
		scope     string
		wantNames []string
		wantBeta  string
	}{
		{"", []string{"Mid", "alpha", "alpha_2", "beta", "zeta"}, "global beta"},
		{"s", []string{"Mid", "alpha", "alpha_2", "beta", "gamma", "zeta"}, "scoped beta"},
		{"unknown-scope", []string{"Mid", "alpha", "alpha_2", "beta", "zeta"}, "global beta"},
	}
	for _, tt := range tests {
		t.Run("scope="+tt.scope, func(t *testing.T) {
			if got := r.Names(tt.scope); !slices.Equal(got, tt.wantNames) {
				t.Fatalf("Names = %v, want %v", got, tt.wantNames)
			}
			schemas := r.Schemas(tt.scope)
			var names []string
			for _, s := range schemas {
				names = append(names, s.Name)
				if s.Name == "beta" && s.Description != tt.wantBeta {
					t.Errorf("beta description = %q, want %q", s.Description, tt.wantBeta)
				}
			}
			if !slices.Equal(names, tt.wantNames) {
				t.Fatalf("schema names = %v, want %v", names, tt.wantNames)
			}
			first, _ := json.Marshal(schemas)
			for range 20 {
				again, _ := json.Marshal(r.Schemas(tt.scope))
				if !bytes.Equal(first, again) {
					t.Fatalf("schema bytes changed between calls:\n%s\n%s", first, again)
				}
			}
		})
	}
}

func TestRegisterCopiesAndCompactsParameters(t *testing.T) {
	r := NewRegistry()
	params := []byte("{ \"type\" : \"object\" }")
	def := defNamed("t", "d")
	def.Parameters = params
	mustRegister(t, r, "", def)
	params[3] = 'X' // the caller reusing its buffer must not reach the model
	got := string(r.Schemas("")[0].Parameters)
	if got != `{"type":"object"}` {
		t.Fatalf("parameters = %s, want the compacted original", got)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scope := fmt.Sprintf("s%d", i%3)
			for j := range 50 {
				name := fmt.Sprintf("t%d_%d", i, j)
				if err := r.Register(scope, defNamed(name, "")); err != nil {
					t.Error(err)
					return
				}
				r.Lookup(scope, name)
				r.Schemas(scope)
				if j%2 == 0 {
					r.Unregister(scope, name)
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for s := range 3 {
		total += len(r.Names(fmt.Sprintf("s%d", s)))
	}
	if total != 8*25 {
		t.Fatalf("visible tools = %d, want %d", total, 8*25)
	}
}

func mustRegister(t *testing.T, r *Registry, scope string, d Definition) {
	t.Helper()
	if err := r.Register(scope, d); err != nil {
		t.Fatal(err)
	}
}

// TestNormalizeParametersAgreesWithDecoding checks the scanning check
// against decoding the schema into a map, which it replaced: the same
// verdict for each schema, and the same compacted bytes.
func TestNormalizeParametersAgreesWithDecoding(t *testing.T) {
	decoded := func(raw json.RawMessage) bool {
		var schema map[string]json.RawMessage
		if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
			return false
		}
		var typ string
		return json.Unmarshal(schema["type"], &typ) == nil && typ == "object"
	}
	for _, raw := range []string{
		`{"type":"object"}`, ` { "type" : "object" , "properties" : {} } `, `{"properties":{"type":"object"},"type":"object"}`,
		`{"properties":{"type":"object"}}`, `{"type":"string"}`, `{"type":"object","type":"string"}`,
		`{"type":"string","type":"object"}`, `{"typ\u0065":"object"}`, `{"type":"obj\u0065ct"}`, `{"type":["object"]}`,
		`{"a":"}\"type\":","type":"object"}`, `{"a":[1,{"b":"]"}],"n":-1.5e3,"t":true,"z":null,"type":"object"}`,
		`{"a":"x\\","type":"object"}`, `{"type":null}`, `{"type":1}`, `{}`, `[]`, `null`, `"object"`, `{"type":`, `{"type":"object"} x`,
		`{"type":"object",}`, `{"description":"a \"type\": \"object\" inside","type":"array"}`,
	} {
		got, err := normalizeParameters(json.RawMessage(raw))
		if want := decoded(json.RawMessage(raw)); (err == nil) != want {
			t.Errorf("%s: err %v, decoding says valid=%v", raw, err, want)
			continue
		}
		if err == nil {
			var c bytes.Buffer
			if cerr := json.Compact(&c, []byte(raw)); cerr != nil || !bytes.Equal(got, c.Bytes()) {
				t.Errorf("%s: normalized to %s", raw, got)
			}
		}
	}
}
