package tool

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Fields is a call's arguments object read field by field, so that every
// wrong type gets a message naming the field and the model can fix its
// call. Tools build their typed readers on it; null counts as absent.
type Fields struct {
	// Tool names the tool in error messages.
	Tool string
	// M holds the raw fields.
	M map[string]json.RawMessage
}

// ParseFields splits raw (which must be a JSON object) into fields.
func ParseFields(toolName string, raw json.RawMessage) (Fields, error) {
	f := Fields{Tool: toolName}
	if err := json.Unmarshal(raw, &f.M); err != nil || f.M == nil {
		return f, f.Invalid("arguments must be a JSON object")
	}
	return f, nil
}

// Invalid returns an INVALID_ARGS error naming the tool.
func (f Fields) Invalid(format string, v ...any) error {
	return Errorf(CodeInvalidArgs, "invalid arguments for "+f.Tool+": "+format, v...)
}

// Get returns a field's raw value; a missing or null field is absent.
func (f Fields) Get(name string) (json.RawMessage, bool) {
	v, ok := f.M[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// Integer reads an optional integer in [lo, hi]; an integral float (3.0)
// is tolerated. ok is false when the field is absent.
func (f Fields) Integer(name string, lo, hi int) (n int, ok bool, err error) {
	v, present := f.Get(name)
	if !present {
		return 0, false, nil
	}
	x, perr := strconv.ParseFloat(strings.TrimSpace(string(v)), 64)
	if perr != nil || !json.Valid(v) || x != float64(int64(x)) {
		return 0, false, f.Invalid("%s must be an integer", name)
	}
	if x < float64(lo) || x > float64(hi) {
		return 0, false, f.Invalid("%s must be between %d and %d", name, lo, hi)
	}
	return int(x), true, nil
}
