package schema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// compiler carries what one compilation needs beyond the subschema at
// hand: whether document keywords are allowed, and the document's
// definitions for $ref.
type compiler struct {
	// doc enables the document keywords (CompileDocument).
	doc bool
	// defs are the root's raw $defs; compiled on first reference.
	defs object
	// compiled holds each definition's schema, created before it is
	// filled in, so a recursive reference resolves to the same value.
	compiled map[string]*Schema
}

// Document is a compiled schema document: a root schema with named
// definitions ($defs), as protocol schemas (ACP's) are published. It is
// immutable and safe for concurrent use.
type Document struct {
	root *Schema
	c    *compiler
}

// CompileDocument compiles a whole schema document. Beyond Compile's
// subset it accepts the keywords such documents use: $defs, $ref (local
// "#/$defs/NAME" references only), allOf, anyOf, oneOf, not, format
// (checked for the integer and number formats int32, uint32, int64,
// uint64, uint16, uint8, int8, int16, double and float; "uri" is an
// annotation), and unevaluatedProperties when it is true (it then
// constrains nothing). default, examples, discriminator and every "x-"
// extension are annotations. Any other keyword, any other format and any
// other reference are compile errors: a constraint that would be skipped
// makes the validator refuse the document (fail closed).
func CompileDocument(raw json.RawMessage) (*Document, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, &CompileError{Message: "not valid JSON: " + err.Error()}
	}
	c := &compiler{doc: true, compiled: map[string]*Schema{}}
	if obj, ok := v.(object); ok {
		if d, ok := obj.get("$defs"); ok {
			defs, ok := d.(object)
			if !ok {
				return nil, &CompileError{Keyword: "$defs", Message: "must be an object of schemas"}
			}
			c.defs = defs
		}
	}
	root, err := c.compile(v, "", 0)
	if err != nil {
		return nil, err
	}
	// Compile every definition, referenced or not, so an unsupported
	// keyword anywhere in the document is reported now.
	for _, kv := range c.defs {
		if _, err := c.def(kv.key); err != nil {
			return nil, err
		}
	}
	return &Document{root: root, c: c}, nil
}

// Root is the document's root schema.
func (d *Document) Root() *Schema { return d.root }

// Def returns the definition named name ($defs/name).
func (d *Document) Def(name string) (*Schema, bool) {
	s, ok := d.c.compiled[name]
	return s, ok
}

// def returns the compiled definition name, compiling it on first use.
func (c *compiler) def(name string) (*Schema, error) {
	if s, ok := c.compiled[name]; ok {
		return s, nil
	}
	raw, ok := c.defs.get(name)
	if !ok {
		return nil, &CompileError{Keyword: "$ref", Message: fmt.Sprintf("no definition %q in $defs", name)}
	}
	s := &Schema{}
	c.compiled[name] = s
	sub, err := c.compile(raw, "/$defs/"+escape(name), 1)
	if err != nil {
		delete(c.compiled, name)
		return nil, err
	}
	*s = *sub
	return s, nil
}

// docKeyword compiles one document keyword into s.
func (s *Schema) docKeyword(c *compiler, k string, v any, ptr string, depth int, bad func(string, ...any) error) error {
	list := func() ([]*Schema, error) {
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			return nil, bad("must be a non-empty array of schemas")
		}
		out := make([]*Schema, len(arr))
		for i, e := range arr {
			sub, err := c.compile(e, fmt.Sprintf("%s/%s/%d", ptr, k, i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = sub
		}
		return out, nil
	}
	var err error
	switch {
	case k == "$defs":
		if ptr != "" {
			return bad("only the root may hold $defs")
		}
	case k == "$ref":
		ref, ok := v.(string)
		name, local := strings.CutPrefix(ref, "#/$defs/")
		if !ok || !local || name == "" || strings.Contains(name, "/") {
			return bad("only local references of the form #/$defs/NAME are supported")
		}
		name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
		if s.ref, err = c.def(name); err != nil {
			return err
		}
		s.refName = name
	case k == "allOf":
		s.allOf, err = list()
	case k == "anyOf":
		s.anyOf, err = list()
	case k == "oneOf":
		s.oneOf, err = list()
	case k == "not":
		s.not, err = c.compile(v, ptr+"/not", depth+1)
	case k == "format":
		f, ok := v.(string)
		if !ok {
			return bad("must be a string")
		}
		if f == "uri" {
			return nil // an annotation: URIs are not checked
		}
		r, ok := formats[f]
		if !ok {
			return bad("format %q is not supported", f)
		}
		s.formatBounds = r
	case k == "unevaluatedProperties":
		if b, ok := v.(bool); !ok || !b {
			return bad("only the value true (no constraint) is supported")
		}
	case k == "default", k == "examples", k == "discriminator", strings.HasPrefix(k, "x-"):
		// Annotations.
	default:
		return bad("unsupported keyword")
	}
	return err
}

// formatRange is what a numeric format requires.
type formatRange struct {
	name     string
	integer  bool
	min, max *big.Float // nil: unbounded
}

func intRange(name string, lo, hi string) *formatRange {
	r := &formatRange{name: name, integer: true}
	r.min, _ = new(big.Float).SetPrec(numPrec).SetString(lo)
	r.max, _ = new(big.Float).SetPrec(numPrec).SetString(hi)
	return r
}

var formats = map[string]*formatRange{
	"int8":   intRange("int8", "-128", "127"),
	"int16":  intRange("int16", "-32768", "32767"),
	"int32":  intRange("int32", "-2147483648", "2147483647"),
	"int64":  intRange("int64", "-9223372036854775808", "9223372036854775807"),
	"uint8":  intRange("uint8", "0", "255"),
	"uint16": intRange("uint16", "0", "65535"),
	"uint32": intRange("uint32", "0", "4294967295"),
	"uint64": intRange("uint64", "0", "18446744073709551615"),
	"double": {name: "double"},
	"float":  {name: "float"},
}

// checkFormat checks a number against a numeric format; other values
// pass (format constrains only its own kind).
func (r *formatRange) check(v any, ptr string, c *collector) {
	n, ok := v.(json.Number)
	if !ok {
		return
	}
	f, ok := toFloat(n)
	if !ok {
		return // reported by the number check
	}
	if r.integer && !f.IsInt() {
		c.add(ptr, "must be an integer (format %s)", r.name)
		return
	}
	if (r.min != nil && f.Cmp(r.min) < 0) || (r.max != nil && f.Cmp(r.max) > 0) {
		c.add(ptr, "out of the %s range", r.name)
	}
}

// checkApplicators applies the document keywords to v.
func (s *Schema) checkApplicators(v any, ptr string, c *collector) {
	if s.ref != nil {
		s.ref.check(v, ptr, c)
	}
	for _, sub := range s.allOf {
		sub.check(v, ptr, c)
	}
	if s.formatBounds != nil {
		s.formatBounds.check(v, ptr, c)
	}
	if s.anyOf != nil {
		ok := false
		for _, sub := range s.anyOf {
			if sub.matches(v, ptr) {
				ok = true
				break
			}
		}
		if !ok {
			c.add(ptr, "matches none of the %d alternatives (anyOf)%s", len(s.anyOf), closest(s.anyOf, v, ptr))
		}
	}
	if s.oneOf != nil {
		n := 0
		for _, sub := range s.oneOf {
			if sub.matches(v, ptr) {
				n++
			}
		}
		switch {
		case n == 0:
			c.add(ptr, "matches none of the %d alternatives (oneOf)%s", len(s.oneOf), closest(s.oneOf, v, ptr))
		case n > 1:
			c.add(ptr, "matches %d of the alternatives, want exactly one (oneOf)", n)
		}
	}
	if s.not != nil && s.not.matches(v, ptr) {
		c.add(ptr, "must not match the schema under \"not\"")
	}
}

// matches reports whether v is valid against s.
func (s *Schema) matches(v any, ptr string) bool {
	var c collector
	s.check(v, ptr, &c)
	return len(c.list) == 0 && c.more == 0
}

// closest names the first violation of the alternative that came closest
// (fewest violations), so a message says more than "no match".
func closest(alts []*Schema, v any, ptr string) string {
	best := -1
	var first Violation
	for _, sub := range alts {
		var c collector
		sub.check(v, ptr, &c)
		n := len(c.list) + c.more
		if n > 0 && (best < 0 || n < best) {
			best, first = n, c.list[0]
		}
	}
	if best < 0 {
		return ""
	}
	return "; closest: " + first.String()
}
