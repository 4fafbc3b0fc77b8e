package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

const testDoc = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$defs": {
    "Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}, "n": {"type": "integer", "format": "uint16"}}, "required": ["n"], "x-side": "agent"},
    "Shape": {"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
      {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"], "allOf": [{"$ref": "#/$defs/Sized"}]}
    ], "discriminator": {"propertyName": "kind"}},
    "Sized": {"type": "object", "properties": {"size": {"type": "number", "format": "double"}}, "required": ["size"], "default": {}},
    "NotNull": {"not": {"type": "null"}, "anyOf": [{"type": "string"}, {"type": "integer", "format": "int8"}]},
    "Open": {"type": "object", "unevaluatedProperties": true}
  },
  "anyOf": [{"$ref": "#/$defs/Node"}, {"$ref": "#/$defs/Shape"}]
}`

func TestDocumentValidates(t *testing.T) {
	d, err := CompileDocument(json.RawMessage(testDoc))
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) *Schema {
		s, ok := d.Def(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return s
	}
	for _, tc := range []struct {
		s     *Schema
		value string
		want  string // "" valid, else a substring of the error
	}{
		{def("Node"), `{"n":1,"kids":[{"n":2,"kids":[{"n":3}]}]}`, ""},
		{def("Node"), `{"n":1,"kids":[{"n":2,"kids":[{}]}]}`, `/kids/0/kids/0: missing required property "n"`},
		{def("Node"), `{"n":70000}`, "out of the uint16 range"},
		{def("Node"), `{"n":-1}`, "out of the uint16 range"},
		{def("Shape"), `{"kind":"a"}`, ""},
		{def("Shape"), `{"kind":"b","size":1.5}`, ""},
		{def("Shape"), `{"kind":"b","size":"big"}`, "closest: "},
		{def("Shape"), `{"kind":"c"}`, "matches none of the 2 alternatives (oneOf)"},
		{def("NotNull"), `"x"`, ""},
		{def("NotNull"), `5`, ""},
		{def("NotNull"), `500`, "anyOf"},
		{def("NotNull"), `null`, "anyOf"},
		{def("Open"), `{"any":1}`, ""},
		{d.Root(), `{"n":1}`, ""},
		{d.Root(), `{"kind":"a"}`, ""},
		{d.Root(), `[]`, "anyOf"},
	} {
		err := tc.s.Validate([]byte(tc.value))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.value, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.value, err, tc.want)
		}
	}
}

// A document keyword the validator cannot enforce is refused, never
// skipped; and Compile keeps its smaller subset.
func TestDocumentFailsClosed(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"$ref":"other.json#/x"}`, "only local references"},
		{`{"$ref":"#/$defs/Missing"}`, `no definition "Missing"`},
		{`{"type":"string","format":"email"}`, `format "email" is not supported`},
		{`{"type":"object","unevaluatedProperties":false}`, "only the value true"},
		{`{"$defs":{"A":{"dependentRequired":{}}}}`, `keyword "dependentRequired"`},
		{`{"properties":{"a":{"$defs":{}}}}`, "only the root may hold $defs"},
		{`{"oneOf":[]}`, "non-empty array"},
	} {
		_, err := CompileDocument(json.RawMessage(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.doc, err, tc.want)
		}
	}
	if _, err := Compile(json.RawMessage(`{"$ref":"#/$defs/A","$defs":{"A":{}}}`)); err == nil {
		t.Error("Compile accepted $ref")
	}
}
