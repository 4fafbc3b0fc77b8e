// Package prompt assembles the system prompt from ordered sections and
// renders the runtime-context snapshot that carries changing policy to
// the model as a logged user message.
//
// The system prompt and the tool list stay byte-stable between requests so
// providers can reuse their prompt cache; anything that changes during a
// session (sandbox mode, approval policy, delegation facts, the date)
// reaches the model through [Runtime] instead.
package prompt

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Section is one ordered part of the system prompt.
type Section struct {
	// Name identifies the section; a scoped section shadows a global one
	// of the same name.
	Name string
	// Order sorts sections (ascending, then by name).
	Order int
	Text  string
	// Literal keeps Text as is, without {{variable}} interpolation.
	Literal bool
	// Complete makes this section the whole system prompt.
	Complete bool
	// Scope is "" for every agent, or one agent scope (preset).
	Scope string
}

// Assembler holds sections. It is safe for concurrent use.
type Assembler struct {
	mu       sync.Mutex
	sections map[string]Section // guarded by mu; key scope+"\x00"+name
}

// NewAssembler returns an empty assembler.
func NewAssembler() *Assembler { return &Assembler{sections: map[string]Section{}} }

// Add registers a section; a duplicate name within one scope is an error.
func (a *Assembler) Add(s Section) error {
	if strings.TrimSpace(s.Name) == "" {
		return fmt.Errorf("prompt section needs a name")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := s.Scope + "\x00" + s.Name
	if _, dup := a.sections[key]; dup {
		return fmt.Errorf("prompt section %q already registered in scope %q", s.Name, s.Scope)
	}
	a.sections[key] = s
	return nil
}

// Sections returns the sections visible to scope, in order: scoped
// sections shadow global ones with the same name. When a visible section
// is Complete, it alone is returned (the lowest-ordered one).
func (a *Assembler) Sections(scope string) []Section {
	a.mu.Lock()
	byName := map[string]Section{}
	for _, s := range a.sections {
		if s.Scope == "" {
			if _, shadowed := byName[s.Name]; !shadowed {
				byName[s.Name] = s
			}
		}
	}
	if scope != "" {
		for _, s := range a.sections {
			if s.Scope == scope {
				byName[s.Name] = s
			}
		}
	}
	a.mu.Unlock()
	out := make([]Section, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Name < out[j].Name
	})
	for _, s := range out {
		if s.Complete {
			return []Section{s}
		}
	}
	return out
}

// Render assembles the system prompt for scope, interpolating vars.
func (a *Assembler) Render(scope string, vars map[string]string) (string, error) {
	var parts []string
	for _, s := range a.Sections(scope) {
		text := s.Text
		if !s.Literal {
			var err error
			if text, err = Interpolate(text, vars); err != nil {
				return "", fmt.Errorf("prompt section %q: %w", s.Name, err)
			}
		}
		if t := strings.TrimSpace(text); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

var varPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]*)\s*\}\}`) })

// UnknownVariableError reports a {{variable}} with no value.
type UnknownVariableError struct{ Name string }

func (e *UnknownVariableError) Error() string {
	return fmt.Sprintf("unknown prompt variable {{%s}}", e.Name)
}

// Interpolate replaces every {{name}} in text with vars[name]. An unknown
// (or empty) name is an error, so a typo never reaches the model.
func Interpolate(text string, vars map[string]string) (string, error) {
	var err error
	out := varPattern().ReplaceAllStringFunc(text, func(m string) string {
		name := varPattern().FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok && err == nil {
			err = &UnknownVariableError{Name: name}
		}
		return v
	})
	return out, err
}
