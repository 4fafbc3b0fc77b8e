package terminal

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
)

// fields reads a call's arguments as named raw values; null is absent.
type fields struct {
	tool string
	m    map[string]json.RawMessage
}

func parseFields(toolName string, raw json.RawMessage) (fields, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fields{}, invalid(toolName, "arguments must be a JSON object")
	}
	for k, v := range m {
		if string(bytes.TrimSpace(v)) == "null" {
			delete(m, k)
		}
	}
	return fields{tool: toolName, m: m}, nil
}

func invalid(toolName, format string, v ...any) error {
	return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for "+toolName+": "+format, v...)
}

func (f fields) str(name string, required bool) (string, error) {
	v, ok := f.m[name]
	if !ok {
		if required {
			return "", invalid(f.tool, "%s is required", name)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", invalid(f.tool, "%s must be a string", name)
	}
	return s, nil
}

func (f fields) boolean(name string, def bool) (bool, error) {
	v, ok := f.m[name]
	if !ok {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, invalid(f.tool, "%s must be a boolean", name)
	}
	return b, nil
}

// integer reads an integral number within [lo, hi]; ok is false when
// absent.
func (f fields) integer(name string, lo, hi int64) (n int64, ok bool, err error) {
	v, ok := f.m[name]
	if !ok {
		return 0, false, nil
	}
	x, perr := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
	if perr != nil || !json.Valid(v) || x != math.Trunc(x) {
		return 0, false, invalid(f.tool, "%s must be an integer", name)
	}
	if x < float64(lo) || x > float64(hi) {
		return 0, false, invalid(f.tool, "%s must be between %d and %d", name, lo, hi)
	}
	return int64(x), true, nil
}

// terminalID reads the required session_id (a terminal id).
func (f fields) terminalID() (string, error) {
	id, err := f.str("session_id", true)
	if err == nil && strings.TrimSpace(id) == "" {
		err = invalid(f.tool, "session_id must name a terminal (terminal_list shows them)")
	}
	return strings.TrimSpace(id), err
}
