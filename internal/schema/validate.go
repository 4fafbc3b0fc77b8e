package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxViolations is how many violations a ValidationError lists; the rest
// are only counted. A model fixing its output needs the first few, not a
// flood.
const MaxViolations = 10

// maxRendered bounds a value quoted in a message (an enum listing, a
// const).
const maxRendered = 200

// Violation is one way a value fails its schema. Pointer is the JSON
// pointer (RFC 6901) of the offending value; "" is the root.
type Violation struct {
	// Pointer locates the offending value.
	Pointer string
	// Message says what is wrong with it.
	Message string
}

// String renders the violation as "pointer: message", the root as
// "(root)".
func (v Violation) String() string {
	at := v.Pointer
	if at == "" {
		at = "(root)"
	}
	return at + ": " + v.Message
}

// ValidationError lists the first violations of a value; More counts
// those left out.
type ValidationError struct {
	// Violations are the first MaxViolations violations, in document
	// order.
	Violations []Violation
	// More counts the violations left out.
	More int
}

// Error lists the violations on one line.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	s := "value does not match the schema: " + strings.Join(parts, "; ")
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more)", e.More)
	}
	return s
}

// SyntaxError reports a value that is not exactly one well-formed JSON
// value (or has duplicate keys or invalid UTF-8).
type SyntaxError struct {
	// Reason is the decoder's complaint.
	Reason string
}

// Error implements error.
func (e *SyntaxError) Error() string { return "value is not valid JSON: " + e.Reason }

// Validate checks value (JSON text) against s. It returns nil, a
// *SyntaxError, or a *ValidationError listing the first violations.
func (s *Schema) Validate(value []byte) error {
	v, err := decode(value)
	if err != nil {
		return &SyntaxError{Reason: err.Error()}
	}
	var c collector
	s.check(v, "", &c)
	if len(c.list) == 0 {
		return nil
	}
	return &ValidationError{Violations: c.list, More: c.more}
}

type collector struct {
	list []Violation
	more int
}

func (c *collector) add(ptr, format string, args ...any) {
	if len(c.list) >= MaxViolations {
		c.more++
		return
	}
	c.list = append(c.list, Violation{Pointer: ptr, Message: fmt.Sprintf(format, args...)})
}

// check validates v at ptr. Depth is bounded by the schema's nesting,
// which Compile limits: recursion only follows subschemas.
func (s *Schema) check(v any, ptr string, c *collector) {
	if s.never {
		c.add(ptr, "no value is allowed here")
		return
	}
	if s.types != nil && !s.typeOK(v) {
		// The other keywords would only restate the mismatch.
		c.add(ptr, "expected %s, got %s", strings.Join(s.types, " or "), kindOf(v))
		return
	}
	s.checkApplicators(v, ptr, c)
	if s.hasConst && !equal(v, s.constVal) {
		c.add(ptr, "must be %s", clip(render(s.constVal)))
	}
	if s.hasEnum && !s.inEnum(v) {
		c.add(ptr, "must be one of %s", clip(render(s.enum)))
	}
	switch t := v.(type) {
	case json.Number:
		s.checkNumber(t, ptr, c)
	case string:
		n := utf8.RuneCountInString(t)
		if s.minLength >= 0 && n < s.minLength {
			c.add(ptr, "must be at least %d characters long (got %d)", s.minLength, n)
		}
		if s.maxLength >= 0 && n > s.maxLength {
			c.add(ptr, "must be at most %d characters long (got %d)", s.maxLength, n)
		}
		if s.pattern != nil && !s.pattern.MatchString(t) {
			c.add(ptr, "must match the pattern %q", s.pattern.String())
		}
	case []any:
		if s.minItems >= 0 && len(t) < s.minItems {
			c.add(ptr, "must have at least %d items (got %d)", s.minItems, len(t))
		}
		if s.maxItems >= 0 && len(t) > s.maxItems {
			c.add(ptr, "must have at most %d items (got %d)", s.maxItems, len(t))
		}
		if s.items != nil {
			for i, e := range t {
				s.items.check(e, fmt.Sprintf("%s/%d", ptr, i), c)
			}
		}
	case object:
		s.checkObject(t, ptr, c)
	}
}

func (s *Schema) typeOK(v any) bool {
	kind := kindOf(v)
	for _, t := range s.types {
		if t == kind || (t == TypeNumber && kind == TypeInteger) {
			return true
		}
	}
	return false
}

func (s *Schema) inEnum(v any) bool {
	for _, e := range s.enum {
		if equal(v, e) {
			return true
		}
	}
	return false
}

func (s *Schema) checkNumber(n json.Number, ptr string, c *collector) {
	f, ok := toFloat(n)
	if !ok {
		c.add(ptr, "number %s is out of range", clip(string(n)))
		return
	}
	if s.minimum != nil && f.Cmp(s.minimum.f) < 0 {
		c.add(ptr, "must be >= %s", clip(s.minimum.text))
	}
	if s.maximum != nil && f.Cmp(s.maximum.f) > 0 {
		c.add(ptr, "must be <= %s", clip(s.maximum.text))
	}
	if s.exclMin != nil && f.Cmp(s.exclMin.f) <= 0 {
		c.add(ptr, "must be > %s", clip(s.exclMin.text))
	}
	if s.exclMax != nil && f.Cmp(s.exclMax.f) >= 0 {
		c.add(ptr, "must be < %s", clip(s.exclMax.text))
	}
}

func (s *Schema) checkObject(obj object, ptr string, c *collector) {
	for _, name := range s.required {
		if _, ok := obj.get(name); !ok {
			c.add(ptr, "missing required property %q", name)
		}
	}
	for _, m := range obj {
		sub := ptr + "/" + escape(m.key)
		if p, ok := s.properties[m.key]; ok {
			p.check(m.val, sub, c)
			continue
		}
		if s.additional == nil {
			continue
		}
		if s.additional.never {
			// Name the property rather than saying "no value is allowed".
			c.add(sub, "property %q is not allowed", m.key)
			continue
		}
		s.additional.check(m.val, sub, c)
	}
}

// clip bounds a quoted value without splitting a UTF-8 sequence.
func clip(s string) string {
	if len(s) <= maxRendered {
		return s
	}
	cut := maxRendered
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
