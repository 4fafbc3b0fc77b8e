// Package compose turns layered profiles into the list of module rows a
// dsh process runs with.
//
// A profile is a list of rows {id, module, config, disabled}. Layers apply
// in order (built-in base, then $DSH_HOME/config.yaml, then each --patch
// file); a later row with the same id replaces the whole earlier row, and
// a new id is appended. Every enabled row's config is decoded by its
// module at composition time, so an unknown module or an invalid config
// fails at start-up naming the row and the file it came from.
package compose

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Row is one entry of a profile.
type Row struct {
	ID       string    `yaml:"id"`
	Module   string    `yaml:"module"`
	Config   yaml.Node `yaml:"config,omitempty"`
	Disabled bool      `yaml:"disabled,omitempty"`
	// Source names the layer (file) the row came from.
	Source string `yaml:"-"`
	// Line is the row's line in Source (0 when unknown).
	Line int `yaml:"-"`
}

// Layer is one source of rows.
type Layer struct {
	Source string
	Rows   []Row
}

// Module decodes and validates a row's configuration. Decode must reject
// unknown keys; the returned value is what the composition root applies.
type Module struct {
	Name string
	Doc  string
	// Decode turns the row's config (nil when the row has none) into the
	// module's value.
	Decode func(cfg *yaml.Node) (any, error)
}

// Registry holds modules by name.
type Registry struct{ modules map[string]Module }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{modules: map[string]Module{}} }

// Register adds m; a duplicate name is an error.
func (r *Registry) Register(m Module) error {
	if m.Name == "" || m.Decode == nil {
		return errors.New("compose: module needs a name and a Decode function")
	}
	if _, dup := r.modules[m.Name]; dup {
		return fmt.Errorf("compose: module %q registered twice", m.Name)
	}
	r.modules[m.Name] = m
	return nil
}

// Names lists the registered modules in order.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.modules))
	for n := range r.modules {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Entry is a composed, enabled row with its decoded value.
type Entry struct {
	Row
	Value any
}

// Composition is the result of applying layers.
type Composition struct {
	// Rows are all rows in order, disabled ones included.
	Rows []Row
	// Entries are the enabled rows with decoded values, in row order.
	Entries []Entry
}

// RowError names the file, line and row of a composition failure.
type RowError struct {
	ID, Module, Source string
	// Line is the line of the problem in Source (0 when unknown).
	Line int
	Err  error
}

// Error is "file, line N: profile row "id" (module m): problem".
func (e *RowError) Error() string {
	where := e.Source
	if e.Line > 0 {
		where += fmt.Sprintf(", line %d", e.Line)
	}
	row := fmt.Sprintf("profile row %q", e.ID)
	if e.Module != "" {
		row += " (module " + e.Module + ")"
	}
	msg := e.Err.Error()
	// A field error's line is already in where.
	if fe, ok := e.Err.(*FieldError); ok && e.Line > 0 {
		msg = fe.Describe()
	}
	return fmt.Sprintf("%s: %s: %s", where, row, msg)
}

func (e *RowError) Unwrap() error { return e.Err }

// Compose applies layers in order and decodes every enabled row.
func (r *Registry) Compose(layers ...Layer) (*Composition, error) {
	var rows []Row
	index := map[string]int{}
	for _, l := range layers {
		for _, row := range l.Rows {
			row.Source = l.Source
			if strings.TrimSpace(row.ID) == "" {
				return nil, &RowError{ID: row.ID, Module: row.Module, Source: l.Source, Line: row.Line, Err: errors.New("the row has no id")}
			}
			if i, ok := index[row.ID]; ok {
				rows[i] = row
				continue
			}
			index[row.ID] = len(rows)
			rows = append(rows, row)
		}
	}
	c := &Composition{Rows: rows}
	for _, row := range rows {
		if row.Disabled {
			continue
		}
		m, ok := r.modules[row.Module]
		if !ok {
			err := fmt.Errorf("unknown module %q (known: %s)", row.Module, strings.Join(r.Names(), ", "))
			if near := Nearest(row.Module, r.Names()); near != "" {
				err = fmt.Errorf("unknown module %q; did you mean %q?", row.Module, near)
			}
			return nil, &RowError{ID: row.ID, Source: row.Source, Line: row.Line, Err: err}
		}
		var cfg *yaml.Node
		if row.Config.Kind != 0 {
			cfg = &row.Config
		}
		v, err := m.Decode(cfg)
		if err != nil {
			re := &RowError{ID: row.ID, Module: row.Module, Source: row.Source, Line: row.Line, Err: Plain(err)}
			if fe, ok := re.Err.(*FieldError); ok && fe.Line > 0 && cfg != nil && cfg.Line > 0 {
				re.Line = fe.Line // the config node keeps its lines in Source
			}
			return nil, re
		}
		c.Entries = append(c.Entries, Entry{Row: row, Value: v})
	}
	return c, nil
}

// Decode is a helper for modules: it decodes cfg strictly into a copy of
// def (the defaults) and returns it. A key or value that does not fit T
// fails with a *FieldError at its line in cfg's document.
func Decode[T any](cfg *yaml.Node, def T) (T, error) {
	if cfg == nil {
		return def, nil
	}
	if err := Check(cfg, reflect.TypeFor[T]()); err != nil {
		return def, err
	}
	// The node decodes as it is (re-encoding it to text and parsing that
	// again cost a good part of composing the profile at every start).
	out := def
	if err := cfg.Load(&out, yaml.WithKnownFields()); err != nil {
		// The row's line, as when the node was decoded from a re-encoded
		// copy whose lines meant nothing to the user.
		if fe, ok := Plain(err).(*FieldError); ok {
			fe.Line = cfg.Line
			return def, fe
		}
		return def, err
	}
	return out, nil
}

// ParseRows reads a YAML list of rows (a profile or patch document).
// Errors are *FieldError values naming the line.
func ParseRows(data []byte) ([]Row, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Plain(err)
	}
	return DecodeRows(&root)
}

// DecodeRows decodes a parsed list of rows strictly, recording each row's
// line.
func DecodeRows(n *yaml.Node) ([]Row, error) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, nil
		}
		n = n.Content[0]
	}
	if n.Kind == 0 {
		return nil, nil
	}
	if err := Check(n, reflect.TypeFor[[]Row]()); err != nil {
		return nil, err
	}
	var rows []Row
	if err := n.Load(&rows, yaml.WithKnownFields()); err != nil {
		return nil, Plain(err)
	}
	if n.Kind == yaml.SequenceNode && len(n.Content) == len(rows) {
		for i := range rows {
			rows[i].Line = n.Content[i].Line
		}
	}
	return rows, nil
}

// PatchFile reads a --patch file: a YAML list of rows, or a mapping with
// a "profile" key holding one.
func PatchFile(path string) (Layer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Layer{}, err
	}
	var probe yaml.Node
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return Layer{}, InFile(path, Plain(err))
	}
	list := &probe
	if len(probe.Content) > 0 && probe.Content[0].Kind == yaml.MappingNode {
		doc := probe.Content[0]
		if err := Check(doc, reflect.TypeFor[struct {
			Profile []Row `yaml:"profile"`
		}]()); err != nil {
			return Layer{}, InFile(path, err)
		}
		list = nil
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if doc.Content[i].Value == "profile" {
				list = doc.Content[i+1]
			}
		}
		if list == nil {
			return Layer{Source: path}, nil
		}
	}
	rows, err := DecodeRows(list)
	if err != nil {
		return Layer{}, InFile(path, err)
	}
	return Layer{Source: path, Rows: rows}, nil
}

// Dumper is implemented by decoded values whose configuration is not the
// value itself (e.g. a value holding a constructor); Dump prints
// DumpConfig instead.
type Dumper interface {
	DumpConfig() any
}

// Dump writes the composed rows as YAML, each preceded by a comment naming
// its source, with decoded values (defaults filled in) as the config.
func (c *Composition) Dump(w io.Writer) error {
	values := map[string]any{}
	for _, e := range c.Entries {
		values[e.ID] = e.Value
	}
	for _, row := range c.Rows {
		out := struct {
			ID       string `yaml:"id"`
			Module   string `yaml:"module"`
			Disabled bool   `yaml:"disabled,omitempty"`
			Config   any    `yaml:"config,omitempty"`
		}{ID: row.ID, Module: row.Module, Disabled: row.Disabled}
		if v, ok := values[row.ID]; ok {
			out.Config = v
			if d, ok := v.(Dumper); ok {
				out.Config = d.DumpConfig()
			}
		} else if row.Config.Kind != 0 {
			out.Config = &row.Config
		}
		b, err := yaml.Marshal([]any{out})
		if err != nil {
			return fmt.Errorf("dump row %s: %w", row.ID, err)
		}
		if _, err := fmt.Fprintf(w, "# from %s\n%s", row.Source, b); err != nil {
			return err
		}
	}
	return nil
}
