// Package schema is a small JSON Schema validator for the subset of
// keywords dsh accepts from callers (a subagent's output schema, and any
// other place where a caller-supplied schema must be enforced).
//
// Supported keywords: type (a name or an array of names), properties,
// required, additionalProperties (a boolean or a schema), items (a single
// schema), enum, const, minimum, maximum, exclusiveMinimum and
// exclusiveMaximum (numeric, draft 6 and later), minLength, maxLength,
// minItems, maxItems and pattern. title, description and $schema are
// accepted and ignored. Every other keyword is a compile error: a schema
// whose constraints would be silently skipped must not be trusted to
// validate anything (fail closed).
//
// Semantics follow JSON Schema 2020-12 for these keywords: integer
// accepts any number with no fractional part (1.0 is an integer), numbers
// compare by value in enum and const (1 equals 1.0), string lengths count
// Unicode code points, and pattern is an unanchored search. Patterns are
// Go regular expressions (RE2), which lack some ECMA-262 features such as
// look-around and back-references; such a pattern fails to compile
// rather than being approximated.
package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strings"
)

// maxNesting bounds subschema nesting, so a hostile schema cannot
// exhaust the stack at compile or validation time.
const maxNesting = 64

// numPrec is the precision numbers are held at. It is far beyond float64,
// so bounds written as decimals compare as their authors expect, and
// bounded, so a huge exponent cannot make comparison expensive.
const numPrec = 200

// JSON type names.
const (
	TypeNull    = "null"
	TypeBoolean = "boolean"
	TypeObject  = "object"
	TypeArray   = "array"
	TypeNumber  = "number"
	TypeInteger = "integer"
	TypeString  = "string"
)

var typeNames = []string{TypeNull, TypeBoolean, TypeObject, TypeArray, TypeNumber, TypeInteger, TypeString}

// Schema is a compiled schema. It is immutable and safe for concurrent
// use.
type Schema struct {
	// never is the boolean schema false (or a schema that is false by
	// construction); always-true schemas simply have no constraints.
	never bool
	// types lists the accepted type names; nil accepts every type.
	types []string
	// typeIsName records that type was written as a single name rather
	// than an array, which is what tool-parameter schemas require.
	typeIsName bool

	properties map[string]*Schema
	required   []string
	additional *Schema // nil: any additional property is allowed
	items      *Schema

	enum     []any
	hasEnum  bool
	constVal any
	hasConst bool

	minimum, maximum, exclMin, exclMax *bound

	minLength, maxLength int // -1 when absent
	minItems, maxItems   int // -1 when absent

	pattern *regexp.Regexp

	// Document keywords (CompileDocument only).
	ref          *Schema // $ref, resolved at compile time
	refName      string
	allOf        []*Schema
	anyOf        []*Schema
	oneOf        []*Schema
	not          *Schema
	formatBounds *formatRange
}

// bound is a numeric bound with the text it was written as. Messages
// quote the text: formatting a big.Float with a huge exponent as decimal
// takes seconds.
type bound struct {
	f    *big.Float
	text string
}

// CompileError reports a schema that cannot be compiled. Pointer is the
// JSON pointer of the offending subschema ("" is the root).
type CompileError struct {
	// Pointer locates the subschema within the schema document.
	Pointer string
	// Keyword names the offending keyword, when one is at fault.
	Keyword string
	// Message says what is wrong.
	Message string
}

// Error implements error.
func (e *CompileError) Error() string {
	where := "schema"
	if e.Pointer != "" {
		where = "schema at " + e.Pointer
	}
	if e.Keyword != "" {
		return fmt.Sprintf("%s: keyword %q: %s", where, e.Keyword, e.Message)
	}
	return where + ": " + e.Message
}

// Compile parses and checks raw. Unknown keywords, keyword values of the
// wrong shape, duplicate object keys and unparseable patterns are errors.
func Compile(raw json.RawMessage) (*Schema, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, &CompileError{Message: "not valid JSON: " + err.Error()}
	}
	return (&compiler{}).compile(v, "", 0)
}

// MustCompile is Compile for schemas known at build time; it panics on
// an error.
func MustCompile(raw string) *Schema {
	s, err := Compile(json.RawMessage(raw))
	if err != nil {
		panic(err)
	}
	return s
}

// RequireObjectRoot reports an error unless the root schema declares
// "type": "object" (as a single name). Tool parameters and structured
// outputs must be objects: providers reject any other root.
func (s *Schema) RequireObjectRoot() error {
	if s.never || !s.typeIsName || len(s.types) != 1 || s.types[0] != TypeObject {
		return &CompileError{Keyword: "type", Message: `the root schema must declare "type": "object"`}
	}
	return nil
}

func (c *compiler) compile(v any, ptr string, depth int) (*Schema, error) {
	if depth > maxNesting {
		return nil, &CompileError{Pointer: ptr, Message: fmt.Sprintf("subschemas nested deeper than %d", maxNesting)}
	}
	s := &Schema{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	if b, ok := v.(bool); ok {
		s.never = !b
		return s, nil
	}
	obj, ok := v.(object)
	if !ok {
		return nil, &CompileError{Pointer: ptr, Message: "a schema must be an object or a boolean, got " + kindOf(v)}
	}
	for _, kv := range obj {
		if err := s.keyword(c, kv.key, kv.val, ptr, depth); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// keyword compiles one keyword into s.
func (s *Schema) keyword(c *compiler, k string, v any, ptr string, depth int) error {
	bad := func(format string, args ...any) error {
		return &CompileError{Pointer: ptr, Keyword: k, Message: fmt.Sprintf(format, args...)}
	}
	var err error
	switch k {
	case "title", "description", "$schema":
		// Annotations: no effect on validation.
	case "type":
		s.types, s.typeIsName, err = compileType(v)
		if err != nil {
			return bad("%v", err)
		}
	case "properties":
		props, ok := v.(object)
		if !ok {
			return bad("must be an object of schemas")
		}
		s.properties = make(map[string]*Schema, len(props))
		for _, kv := range props {
			sub, err := c.compile(kv.val, ptr+"/properties/"+escape(kv.key), depth+1)
			if err != nil {
				return err
			}
			s.properties[kv.key] = sub
		}
	case "required":
		s.required, err = stringSet(v)
		if err != nil {
			return bad("%v", err)
		}
	case "additionalProperties":
		if s.additional, err = c.compile(v, ptr+"/additionalProperties", depth+1); err != nil {
			return err
		}
	case "items":
		if _, isArray := v.([]any); isArray {
			return bad("the array form (tuple validation) is not supported; give a single schema")
		}
		if s.items, err = c.compile(v, ptr+"/items", depth+1); err != nil {
			return err
		}
	case "enum":
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return bad("must be a non-empty array")
		}
		s.enum, s.hasEnum = list, true
	case "const":
		s.constVal, s.hasConst = v, true
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		n, ok := v.(json.Number)
		if !ok {
			if _, isBool := v.(bool); isBool && strings.HasPrefix(k, "exclusive") {
				return bad("must be a number (the draft-4 boolean form is not supported)")
			}
			return bad("must be a number")
		}
		f, ok := toFloat(n)
		if !ok {
			return bad("number %s is out of range", n)
		}
		b := &bound{f: f, text: string(n)}
		switch k {
		case "minimum":
			s.minimum = b
		case "maximum":
			s.maximum = b
		case "exclusiveMinimum":
			s.exclMin = b
		default:
			s.exclMax = b
		}
	case "minLength", "maxLength", "minItems", "maxItems":
		n, ok := count(v)
		if !ok {
			return bad("must be a non-negative integer")
		}
		switch k {
		case "minLength":
			s.minLength = n
		case "maxLength":
			s.maxLength = n
		case "minItems":
			s.minItems = n
		default:
			s.maxItems = n
		}
	case "pattern":
		src, ok := v.(string)
		if !ok {
			return bad("must be a string")
		}
		if s.pattern, err = regexp.Compile(src); err != nil {
			return bad("not a supported regular expression (RE2 syntax): %v", err)
		}
	default:
		if c.doc {
			return s.docKeyword(c, k, v, ptr, depth, bad)
		}
		return bad("unsupported keyword")
	}
	return nil
}

func compileType(v any) (types []string, isName bool, err error) {
	switch t := v.(type) {
	case string:
		if !slices.Contains(typeNames, t) {
			return nil, false, fmt.Errorf("unknown type %q (want one of %s)", t, strings.Join(typeNames, ", "))
		}
		return []string{t}, true, nil
	case []any:
		set, err := stringSet(t)
		if err != nil || len(set) == 0 {
			return nil, false, fmt.Errorf("must be a type name or a non-empty array of unique type names")
		}
		for _, name := range set {
			if !slices.Contains(typeNames, name) {
				return nil, false, fmt.Errorf("unknown type %q (want one of %s)", name, strings.Join(typeNames, ", "))
			}
		}
		return set, false, nil
	}
	return nil, false, fmt.Errorf("must be a type name or an array of type names")
}

// stringSet reads an array of unique strings.
func stringSet(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be an array of strings")
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("must be an array of strings")
		}
		if slices.Contains(out, s) {
			return nil, fmt.Errorf("lists %q twice", s)
		}
		out = append(out, s)
	}
	return out, nil
}

// count reads a non-negative integer keyword value (2.0 is accepted, as
// the specification allows).
func count(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, ok := toFloat(n)
	if !ok || f.Sign() < 0 || !f.IsInt() {
		return 0, false
	}
	if f.Cmp(big.NewFloat(math.MaxInt32)) > 0 {
		// A bound this large cannot be reached by any real value.
		return math.MaxInt32, true
	}
	i, _ := f.Int64()
	return int(i), true
}

// toFloat parses a JSON number; ok is false when it overflows.
func toFloat(n json.Number) (*big.Float, bool) {
	f, ok := new(big.Float).SetPrec(numPrec).SetString(string(n))
	if !ok || f.IsInf() {
		return nil, false
	}
	return f, true
}

// escape encodes a property name as a JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func kindOf(v any) string {
	switch t := v.(type) {
	case nil:
		return TypeNull
	case bool:
		return TypeBoolean
	case object:
		return TypeObject
	case []any:
		return TypeArray
	case json.Number:
		if f, ok := toFloat(t); ok && f.IsInt() {
			return TypeInteger
		}
		return TypeNumber
	case string:
		return TypeString
	}
	return fmt.Sprintf("%T", v)
}
