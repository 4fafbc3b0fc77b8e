package tool

import "encoding/json"

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
