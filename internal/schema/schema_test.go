package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         string // substring of the error
	}{
		{"unknown keyword fails closed", `{"type":"object","oneOf":[]}`, `keyword "oneOf": unsupported keyword`},
		{"nested unknown keyword names its place", `{"properties":{"a/b":{"format":"email"}}}`, `schema at /properties/a~1b: keyword "format"`},
		{"default is not an accepted annotation", `{"type":"string","default":"x"}`, `keyword "default"`},
		{"unknown type name", `{"type":"float"}`, `unknown type "float"`},
		{"empty type array", `{"type":[]}`, `non-empty array`},
		{"duplicate type", `{"type":["string","string"]}`, `keyword "type"`},
		{"required not strings", `{"required":[1]}`, `array of strings`},
		{"required duplicate", `{"required":["a","a"]}`, `lists "a" twice`},
		{"tuple items", `{"items":[{"type":"string"}]}`, `tuple validation`},
		{"empty enum", `{"enum":[]}`, `non-empty array`},
		{"draft-4 exclusiveMinimum", `{"exclusiveMinimum":true}`, `draft-4 boolean form`},
		{"minimum not a number", `{"minimum":"1"}`, `must be a number`},
		{"negative minLength", `{"minLength":-1}`, `non-negative integer`},
		{"fractional maxItems", `{"maxItems":1.5}`, `non-negative integer`},
		{"bad pattern", `{"pattern":"(?<=a)b"}`, `RE2`},
		{"schema not an object", `{"properties":{"a":"string"}}`, `must be an object or a boolean`},
		{"additionalProperties not a schema", `{"additionalProperties":1}`, `must be an object or a boolean`},
		{"duplicate key", `{"type":"object","type":"string"}`, `duplicate object key "type"`},
		{"not JSON", `{"type":`, `not valid JSON`},
		{"trailing data", `{} {}`, `trailing data`},
		{"too deep", strings.Repeat(`{"items":`, maxNesting+2) + `{}` + strings.Repeat(`}`, maxNesting+2), `nested deeper`},
		{"huge bound", `{"maximum":1e999999999999}`, `out of range`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tc.schema))
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile = %v, want a *CompileError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestRequireObjectRoot(t *testing.T) {
	for _, tc := range []struct {
		schema string
		ok     bool
	}{
		{`{"type":"object"}`, true},
		{`{"type":"object","title":"t","$schema":"https://json-schema.org/draft/2020-12/schema","description":"d"}`, true},
		{`{"type":["object"]}`, false}, // providers want the single-name form
		{`{"type":["object","null"]}`, false},
		{`{"type":"array"}`, false},
		{`{}`, false},
		{`true`, false},
	} {
		s, err := Compile(json.RawMessage(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		if err := s.RequireObjectRoot(); (err == nil) != tc.ok {
			t.Errorf("%s: RequireObjectRoot = %v, want ok=%v", tc.schema, err, tc.ok)
		}
	}
}

const person = `{
	"type": "object",
	"properties": {
		"name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[A-Z]"},
		"age": {"type": "integer", "minimum": 0, "exclusiveMaximum": 150},
		"score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
		"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "maxItems": 2},
		"kind": {"const": {"v": [1, "x"]}},
		"nick": {"type": ["string", "null"]},
		"a/b~c": {"type": "boolean"}
	},
	"required": ["name", "age"],
	"additionalProperties": false
}`

func TestValidate(t *testing.T) {
	s := MustCompile(person)
	for _, tc := range []struct {
		name  string
		value string
		want  []Violation // nil: valid
	}{
		{"minimal", `{"name":"Ann","age":30}`, nil},
		{"everything", `{"name":"Ann","age":30.0,"score":1,"tags":["a","b"],"kind":{"v":[1.0,"x"]},"nick":null,"a/b~c":true}`, nil},
		{"not an object", `[]`, []Violation{{"", "expected object, got array"}}},
		{"missing required", `{}`, []Violation{{"", `missing required property "name"`}, {"", `missing required property "age"`}}},
		{"wrong type", `{"name":7,"age":"x"}`, []Violation{{"/name", "expected string, got integer"}, {"/age", "expected integer, got string"}}},
		{"integer vs number", `{"name":"Ann","age":1.5}`, []Violation{{"/age", "expected integer, got number"}}},
		{"string bounds count code points", `{"name":"Aäääää","age":1}`, []Violation{{"/name", "must be at most 5 characters long (got 6)"}}},
		{"empty string", `{"name":"","age":1}`, []Violation{{"/name", "must be at least 1 characters long (got 0)"}, {"/name", `must match the pattern "^[A-Z]"`}}},
		{"numeric bounds", `{"name":"A","age":150,"score":0}`, []Violation{{"/age", "must be < 150"}, {"/score", "must be > 0"}}},
		{"minimum", `{"name":"A","age":-1,"score":1.5}`, []Violation{{"/age", "must be >= 0"}, {"/score", "must be <= 1"}}},
		{"items", `{"name":"A","age":1,"tags":["a","c",1]}`, []Violation{
			{"/tags", "must have at most 2 items (got 3)"}, {"/tags/1", `must be one of ["a","b"]`}, {"/tags/2", "expected string, got integer"}}},
		{"minItems", `{"name":"A","age":1,"tags":[]}`, []Violation{{"/tags", "must have at least 1 items (got 0)"}}},
		{"const", `{"name":"A","age":1,"kind":{"v":[2,"x"]}}`, []Violation{{"/kind", `must be {"v":[1,"x"]}`}}},
		{"type union", `{"name":"A","age":1,"nick":3}`, []Violation{{"/nick", "expected string or null, got integer"}}},
		{"additional property and escaped pointer", `{"name":"A","age":1,"extra":1,"a/b~c":0}`, []Violation{
			{"/extra", `property "extra" is not allowed`}, {"/a~1b~0c", "expected boolean, got integer"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate([]byte(tc.value))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a *ValidationError", err)
			}
			if len(ve.Violations) != len(tc.want) {
				t.Fatalf("violations = %v, want %v", ve.Violations, tc.want)
			}
			for i := range tc.want {
				if ve.Violations[i] != tc.want[i] {
					t.Errorf("violation %d = %v, want %v", i, ve.Violations[i], tc.want[i])
				}
			}
		})
	}
}

func TestValidateSchemaForms(t *testing.T) {
	for _, tc := range []struct {
		name, schema, value string
		valid               bool
	}{
		{"true accepts anything", `true`, `{"a":[1,null]}`, true},
		{"false rejects everything", `false`, `null`, false},
		{"empty schema accepts anything", `{}`, `"x"`, true},
		{"additionalProperties schema", `{"additionalProperties":{"type":"integer"}}`, `{"a":1,"b":2}`, true},
		{"additionalProperties schema violated", `{"additionalProperties":{"type":"integer"}}`, `{"a":1,"b":"x"}`, false},
		{"additionalProperties true", `{"properties":{"a":{"type":"string"}},"additionalProperties":true}`, `{"b":1}`, true},
		{"enum numbers by value", `{"enum":[1,2.5]}`, `1.0`, true},
		{"enum objects regardless of order", `{"enum":[{"a":1,"b":2}]}`, `{"b":2,"a":1}`, true},
		{"enum mismatch", `{"enum":["a"]}`, `"b"`, false},
		{"number accepts integers", `{"type":"number"}`, `3`, true},
		{"integer accepts exponent form", `{"type":"integer"}`, `1e3`, true},
		{"keywords of other types ignored", `{"minLength":3,"minItems":2,"minimum":5}`, `true`, true},
		{"pattern is a search", `{"pattern":"b+"}`, `"abbbc"`, true},
		{"huge number compared by value", `{"maximum":1e300}`, `1e301`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate([]byte(tc.value)); (err == nil) != tc.valid {
				t.Fatalf("Validate(%s) = %v, want valid=%v", tc.value, err, tc.valid)
			}
		})
	}
}

func TestValidateSyntax(t *testing.T) {
	s := MustCompile(`{}`)
	for _, value := range []string{``, `{`, `{"a":1,"a":2}`, "\"\xff\"", `1 2`, strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)} {
		var se *SyntaxError
		if err := s.Validate([]byte(value)); !errors.As(err, &se) {
			t.Errorf("Validate(%q) = %v, want a *SyntaxError", value, err)
		}
	}
}

func TestViolationsBounded(t *testing.T) {
	s := MustCompile(`{"type":"array","items":{"type":"string"}}`)
	err := s.Validate([]byte(`[` + strings.TrimSuffix(strings.Repeat(`1,`, MaxViolations+5), ",") + `]`))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Violations) != MaxViolations || ve.More != 5 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "(and 5 more)") || !strings.Contains(err.Error(), "/0: expected string") {
		t.Errorf("message %q", err)
	}
	long := MustCompile(`{"const":"` + strings.Repeat("é", 300) + `"}`)
	if msg := long.Validate([]byte(`"x"`)).Error(); len(msg) > 400 {
		t.Errorf("const message not bounded: %d bytes", len(msg))
	}
}

func FuzzValidate(f *testing.F) {
	f.Add([]byte(person), []byte(`{"name":"Ann","age":30}`))
	f.Add([]byte(`{"type":["integer","null"],"enum":[1,null]}`), []byte(`1.0`))
	f.Add([]byte(`{"items":{"items":{"const":[1]}}}`), []byte(`[[[1]],[2]]`))
	f.Add([]byte(`{"additionalProperties":false,"pattern":"^a"}`), []byte(`{"a":"b"}`))
	f.Add([]byte(`false`), []byte(`{"a":{"a":1,"a":2}}`))
	f.Fuzz(func(t *testing.T, schemaText, value []byte) {
		s, err := Compile(schemaText)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error of type %T: %v", err, err)
			}
			return
		}
		err = s.Validate(value)
		if err == nil {
			// A valid value is well-formed JSON.
			if !json.Valid(value) {
				t.Fatalf("invalid JSON %q validated", value)
			}
			return
		}
		var ve *ValidationError
		var se *SyntaxError
		switch {
		case errors.As(err, &ve):
			if len(ve.Violations) == 0 || len(ve.Violations) > MaxViolations {
				t.Fatalf("%d violations", len(ve.Violations))
			}
		case errors.As(err, &se):
		default:
			t.Fatalf("Validate error of type %T: %v", err, err)
		}
		// Validation is deterministic.
		if again := s.Validate(value); again == nil || again.Error() != err.Error() {
			t.Fatalf("second Validate = %v, first %v", again, err)
		}
	})
}
