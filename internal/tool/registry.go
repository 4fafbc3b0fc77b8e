package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dsh-dev/dsh/internal/llm"
)

// maxNameLen is the longest tool name accepted. Provider APIs (OpenAI,
// Anthropic) reject names over 64 characters, and a registration-time
// error is far easier to debug than a 400 from every model request.
const maxNameLen = 64

// Registry holds tool definitions in layers: the global layer (scope "")
// and one layer per agent scope. A scoped definition shadows a global one
// with the same name for calls in that scope. Registry is safe for
// concurrent use; definitions are copied on registration and must be
// treated as immutable afterwards.
type Registry struct {
	mu     sync.RWMutex
	layers map[string]map[string]*Definition
	// explainers say why a name is not registered now (guarded by mu).
	explainers []Explainer
}

// Explainer says why a tool name the model called is not registered now,
// e.g. because the server that provides it is disconnected: it returns
// the error the call ends with, or nil when it knows nothing of name.
type Explainer func(name string) *Error

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{layers: map[string]map[string]*Definition{}}
}

// Register adds def to the layer of scope ("" is global). It fails on an
// empty or provider-incompatible name, a nil Execute, Parameters that are
// not a JSON object schema, or a name already registered in the same
// layer. Registering a scoped tool with a global tool's name is allowed:
// the scoped one shadows the global one in that scope.
func (r *Registry) Register(scope string, def Definition) error {
	if err := validName(def.Name); err != nil {
		return err
	}
	if def.Execute == nil {
		return fmt.Errorf("tool %s: Execute is nil", def.Name)
	}
	params, err := normalizeParameters(def.Parameters)
	if err != nil {
		return fmt.Errorf("tool %s: %w", def.Name, err)
	}
	// The copy protects the registry from later mutation of the caller's
	// slice, which would silently change the bytes sent to the model and
	// break provider prompt caching.
	def.Parameters = params

	r.mu.Lock()
	defer r.mu.Unlock()
	layer := r.layers[scope]
	if layer == nil {
		layer = map[string]*Definition{}
		r.layers[scope] = layer
	}
	if _, dup := layer[def.Name]; dup {
		if scope == "" {
			return fmt.Errorf("tool %s is already registered globally", def.Name)
		}
		return fmt.Errorf("tool %s is already registered in scope %q", def.Name, scope)
	}
	layer[def.Name] = &def
	return nil
}

// Unregister removes name from the layer of scope and reports whether it
// was there. It never touches another layer: removing a scoped tool
// uncovers the global one it shadowed.
func (r *Registry) Unregister(scope, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	layer := r.layers[scope]
	if _, ok := layer[name]; !ok {
		return false
	}
	delete(layer, name)
	if len(layer) == 0 {
		delete(r.layers, scope)
	}
	return true
}

// AddExplainer adds an explainer consulted, in order, for a call to a
// name no layer holds. Explainers run without the registry's lock held.
func (r *Registry) AddExplainer(e Explainer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.explainers = append(r.explainers, e)
}

// Explain returns the first explainer's error for an unregistered name,
// or nil.
func (r *Registry) Explain(name string) *Error {
	r.mu.RLock()
	es := r.explainers
	r.mu.RUnlock()
	for _, e := range es {
		if err := e(name); err != nil {
			return err
		}
	}
	return nil
}

// Lookup finds name for a call in scope: the scope's own layer first, then
// the global layer. The returned definition must not be modified.
func (r *Registry) Lookup(scope, name string) (*Definition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if scope != "" {
		if d, ok := r.layers[scope][name]; ok {
			return d, true
		}
	}
	d, ok := r.layers[""][name]
	return d, ok
}

// Schemas returns the model-facing schemas of every tool visible in scope,
// in lexicographic name order. Only name, description and parameters are
// copied out, and the order and bytes are identical across calls as long
// as the registrations do not change, so requests stay prompt-cacheable.
func (r *Registry) Schemas(scope string) []llm.ToolSchema {
	defs := r.visible(scope)
	out := make([]llm.ToolSchema, len(defs))
	for i, d := range defs {
		out[i] = d.Schema()
	}
	return out
}

// Names returns the names of every tool visible in scope, sorted.
func (r *Registry) Names(scope string) []string {
	defs := r.visible(scope)
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

// visible returns the definitions visible in scope sorted by name, with
// scoped definitions replacing global ones of the same name.
func (r *Registry) visible(scope string) []*Definition {
	r.mu.RLock()
	global, scoped := r.layers[""], r.layers[scope]
	if scope == "" {
		scoped = nil
	}
	out := make([]*Definition, 0, len(global)+len(scoped))
	for name, d := range global {
		if _, shadowed := scoped[name]; !shadowed {
			out = append(out, d)
		}
	}
	for _, d := range scoped {
		out = append(out, d)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Definition) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// validName enforces the character set and length every provider accepts
// for function names (^[a-zA-Z0-9_-]{1,64}$).
func validName(name string) error {
	if name == "" {
		return errors.New("tool name is empty")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("tool name %q is longer than %d characters", name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("tool name %q has a character outside [a-zA-Z0-9_-]", name)
		}
	}
	return nil
}

// normalizeParameters checks that raw is a JSON object schema (a JSON
// object whose "type" is "object": providers require the arguments of a
// function to be an object) and returns a compacted private copy.
//
// Every tool is registered at every session's start, before the first
// request: the schema is compacted (which validates it) and its top-level
// members are scanned for "type", rather than decoded into a map (which
// allocated every member and was most of a session's wiring).
func normalizeParameters(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("parameters schema is empty")
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, errors.New("parameters schema is not a JSON object")
	}
	typ, ok := topLevelMember(buf.Bytes(), "type")
	var s string
	if !ok || json.Unmarshal(typ, &s) != nil || s != "object" {
		return nil, errors.New(`parameters schema must have "type": "object"`)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// topLevelMember returns the value of the last member named name of obj, a
// compacted JSON object (the last, as decoding into a map would keep).
func topLevelMember(obj []byte, name string) (json.RawMessage, bool) {
	var val json.RawMessage
	found := false
	i := 1 // past '{'
	for i < len(obj) && obj[i] != '}' {
		end := stringEnd(obj, i)
		key := obj[i:end]
		i = end + 1 // past ':'
		if i >= len(obj) {
			break // not compacted JSON: no value
		}
		vend := valueEnd(obj, i)
		if keyIs(key, name) {
			val, found = obj[i:vend], true
		}
		i = vend
		if i < len(obj) && obj[i] == ',' {
			i++
		}
	}
	return val, found
}

// keyIs reports whether the JSON string key (quotes included) is name.
func keyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return len(key) == len(name)+2 && string(key[1:len(key)-1]) == name
	}
	var k string
	return json.Unmarshal(key, &k) == nil && k == name
}

// stringEnd returns the index just past the JSON string starting at i.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the compacted JSON value at i.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	for j := i; j < len(b); j++ { // a number, true, false or null
		if b[j] == ',' || b[j] == '}' {
			return j
		}
	}
	return len(b)
}
