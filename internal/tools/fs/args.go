package fs

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/dsh-dev/dsh/internal/tool"
)

// Args is a tool's decoded arguments object. Fields are checked one by
// one, rather than unmarshalled into a struct, so that every wrong type
// gets a message naming the field and the model can fix its call. A JSON
// null counts as absent everywhere; unknown fields are ignored.
type Args struct {
	tool   string
	fields map[string]json.RawMessage
}

// ParseArgs decodes raw, which must be a JSON object; toolName appears in
// error messages.
func ParseArgs(toolName string, raw json.RawMessage) (Args, error) {
	a := Args{tool: toolName}
	if err := json.Unmarshal(raw, &a.fields); err != nil || a.fields == nil {
		return a, a.Invalid("arguments must be a JSON object")
	}
	return a, nil
}

// Invalid returns an INVALID_ARGS error for this tool.
func (a Args) Invalid(format string, v ...any) error {
	return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for "+a.tool+": "+format, v...)
}

// raw returns the field's JSON, or false when it is absent or null.
func (a Args) raw(name string) (json.RawMessage, bool) {
	v, ok := a.fields[name]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil, false
	}
	return v, true
}

// IsNull reports whether the field is present with the value null.
func (a Args) IsNull(name string) bool {
	v, ok := a.fields[name]
	return ok && string(bytes.TrimSpace(v)) == "null"
}

// String returns a string field and whether it was given.
func (a Args) String(name string) (string, bool, error) {
	v, ok := a.raw(name)
	if !ok {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, a.Invalid("%s must be a string", name)
	}
	return s, true, nil
}

// RequiredString returns a string field that must be given (it may be
// empty).
func (a Args) RequiredString(name string) (string, error) {
	s, ok, err := a.String(name)
	if err == nil && !ok {
		err = a.Invalid("%s is required", name)
	}
	return s, err
}

// Int returns an integer field and whether it was given. An integral
// float (12.0) is accepted: some models emit every number that way.
func (a Args) Int(name string) (int, bool, error) {
	v, ok := a.raw(name)
	if !ok {
		return 0, false, nil
	}
	n, err := parseInt(v)
	if err != nil {
		return 0, false, a.Invalid("%s must be an integer", name)
	}
	return n, true, nil
}

// Bool returns a boolean field and whether it was given.
func (a Args) Bool(name string) (bool, bool, error) {
	v, ok := a.raw(name)
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, false, a.Invalid("%s must be true or false", name)
	}
	return b, true, nil
}

// Ints returns an array-of-integers field and whether it was given.
func (a Args) Ints(name string) ([]int, bool, error) {
	v, ok := a.raw(name)
	if !ok {
		return nil, false, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, false, a.Invalid("%s must be an array of integers", name)
	}
	out := make([]int, len(items))
	for i, it := range items {
		n, err := parseInt(it)
		if err != nil {
			return nil, false, a.Invalid("%s must be an array of integers", name)
		}
		out[i] = n
	}
	return out, true, nil
}

// parseInt accepts a JSON number with an integral value that fits an int32
// range (line numbers and counts never need more).
func parseInt(v json.RawMessage) (int, error) {
	v = bytes.TrimSpace(v)
	f, err := strconv.ParseFloat(string(v), 64)
	// ParseFloat also accepts "Inf" and "0x10"; the JSON check rules those
	// out.
	if err != nil || !json.Valid(v) || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, strconv.ErrSyntax
	}
	return int(f), nil
}
