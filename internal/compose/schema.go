package compose

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v4"
)

// Codes of a *FieldError, stable for machines.
const (
	CodeUnknownKey = "CONFIG_UNKNOWN_KEY" // a key the schema does not have
	CodeBadValue   = "CONFIG_BAD_VALUE"   // a value of the wrong kind
	CodeSyntax     = "CONFIG_SYNTAX"      // not well-formed YAML
)

// FieldError is a configuration problem at one place of a YAML document,
// said in plain words: the line, the key and what is wrong, with the
// nearest valid key when the key looks like a typo. It never shows Go
// type names.
type FieldError struct {
	Code string
	// Line is 1-based; 0 when the position is unknown.
	Line int
	// Key is the path of the offending key ("providers[0].base_url"); ""
	// for the document as a whole.
	Key string
	// Problem says what is wrong, without the line.
	Problem string
	// Suggestion is the nearest valid key, when one is close enough.
	Suggestion string
}

// Error is "line N: problem; did you mean ...?".
func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Describe())
	}
	return e.Describe()
}

// Describe is the problem and suggestion without the line.
func (e *FieldError) Describe() string {
	if e.Suggestion != "" {
		return fmt.Sprintf("%s; did you mean %q?", e.Problem, e.Suggestion)
	}
	return e.Problem
}

// InFile prefixes a configuration error with the file it is in:
// "path, line N: ..." for a *FieldError with a line, "path: ..." else.
func InFile(path string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) && fe.Line > 0 {
		return fmt.Errorf("%s, %w", path, err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	nodeType        = reflect.TypeFor[yaml.Node]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Check reports the first place where n does not fit a value of type t
// decoded strictly (unknown keys rejected), as a *FieldError; nil when it
// fits. The decoder's own verdict on each scalar is used, so Check and
// decoding agree; what Check cannot see (a type with its own
// UnmarshalYAML) is left to the decoder.
func Check(n *yaml.Node, t reflect.Type) error {
	if fe := check(n, t, ""); fe != nil {
		return fe
	}
	return nil
}

func check(n *yaml.Node, t reflect.Type, path string) *FieldError {
	if n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return check(n.Content[0], t, path)
	case yaml.AliasNode:
		return check(n.Alias, t, path)
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // null leaves the value as it was
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nodeType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	if reflect.PointerTo(t).Implements(textType) {
		return leaf(n, t, path, "text")
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return wrongKind(n, path, "a mapping of keys to values")
		}
		fields, open := structFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMerge(k) {
				if fe := checkMerge(v, t, path); fe != nil {
					return fe
				}
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				if open {
					continue
				}
				return unknownKey(k, path, fields)
			}
			if fe := check(v, ft, join(path, k.Value)); fe != nil {
				return fe
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return wrongKind(n, path, "a mapping of keys to values")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMerge(k) {
				if fe := checkMerge(v, t, path); fe != nil {
					return fe
				}
				continue
			}
			if fe := leaf(k, t.Key(), join(path, k.Value), words(t.Key())); fe != nil {
				fe.Problem = fmt.Sprintf("the key %q cannot be used here: keys must be %s", k.Value, words(t.Key()))
				return fe
			}
			if fe := check(v, t.Elem(), join(path, k.Value)); fe != nil {
				return fe
			}
		}
		return nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return leaf(n, t, path, "text")
		}
		if n.Kind != yaml.SequenceNode {
			return wrongKind(n, path, "a list")
		}
		for i, item := range n.Content {
			if fe := check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); fe != nil {
				return fe
			}
		}
		return nil
	}
	return leaf(n, t, path, words(t))
}

// isMerge reports a YAML merge key ("<<: *anchor").
func isMerge(k *yaml.Node) bool { return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" }

// checkMerge checks what a merge key brings in (a mapping, or a list of
// them) against the mapping's own type.
func checkMerge(v *yaml.Node, t reflect.Type, path string) *FieldError {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v.Kind == yaml.SequenceNode {
		for _, item := range v.Content {
			if fe := check(item, t, path); fe != nil {
				return fe
			}
		}
		return nil
	}
	return check(v, t, path)
}

// leaf checks a scalar by decoding it alone into a fresh t.
func leaf(n *yaml.Node, t reflect.Type, path, want string) *FieldError {
	if n.Kind != yaml.ScalarNode {
		return wrongKind(n, path, want)
	}
	if err := n.Load(reflect.New(t).Interface()); err != nil {
		return &FieldError{Code: CodeBadValue, Line: n.Line, Key: path, Problem: fmt.Sprintf("%s must be %s, not %q", keyWords(path), want, n.Value)}
	}
	return nil
}

func wrongKind(n *yaml.Node, path, want string) *FieldError {
	return &FieldError{Code: CodeBadValue, Line: n.Line, Key: path, Problem: fmt.Sprintf("%s must be %s, not %s", keyWords(path), want, nodeWords(n))}
}

func unknownKey(k *yaml.Node, path string, fields map[string]reflect.Type) *FieldError {
	known := make([]string, 0, len(fields))
	for f := range fields {
		known = append(known, f)
	}
	sort.Strings(known)
	fe := &FieldError{Code: CodeUnknownKey, Line: k.Line, Key: join(path, k.Value), Suggestion: Nearest(k.Value, known)}
	where := ""
	if path != "" {
		where = " in " + path
	}
	fe.Problem = fmt.Sprintf("unknown key %q%s", k.Value, where)
	if fe.Suggestion == "" {
		if len(known) == 0 {
			fe.Problem += " (this mapping takes no keys)"
		} else {
			fe.Problem += " (known keys: " + strings.Join(known, ", ") + ")"
		}
	}
	return fe
}

// structFields maps a struct's YAML keys to their types; open is true
// when an inline map takes any other key.
func structFields(t reflect.Type) (fields map[string]reflect.Type, open bool) {
	fields = map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Map {
				open = true
				continue
			}
			inner, innerOpen := structFields(ft)
			for k, v := range inner {
				fields[k] = v
			}
			open = open || innerOpen
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields, open
}

// words says in plain words what a value of type t looks like.
func words(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s, 5m or 1h30m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, zero or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	}
	return "a single value"
}

func nodeWords(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func keyWords(path string) string {
	if path == "" {
		return "the configuration"
	}
	return fmt.Sprintf("key %q", path)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Nearest returns the candidate closest to s when it is close enough to
// be a typo (case, '-' for '_', a few edits), else "".
func Nearest(s string, candidates []string) string {
	norm := func(x string) string { return strings.ReplaceAll(strings.ToLower(x), "-", "_") }
	best, bestD := "", 0
	for _, c := range candidates {
		d := distance(norm(s), norm(c))
		if best == "" || d < bestD {
			best, bestD = c, d
		}
	}
	limit := 1
	switch n := min(len(s), len(best)); {
	case n > 8:
		limit = 3
	case n > 4:
		limit = 2
	}
	if best == "" || bestD > limit {
		return ""
	}
	return best
}

// distance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of neighbours each cost one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

var (
	yamlPrefix = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(yaml: )?((construct|unmarshal) errors:\s*)?(go-yaml load error in \w+( \([^)]*\))? at [0-9:-]+: )?`)
	})
	lineNumber   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^line (\d+): `) })
	notFound     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`field (\S+) not found in type \S+`) })
	cannotDecode = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("cannot (construct|unmarshal) !!\\w+ (`[^`]*`|\\S+)? ?into \\S+")
	})
	goTypeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*?\b[a-z][a-z0-9]*\.[A-Z]\w*`) })
)

// Plain turns an error of the YAML decoder into a *FieldError in plain
// words: its line, and no Go type names. Errors of other kinds are
// returned unchanged.
func Plain(err error) error {
	if err == nil {
		return nil
	}
	var le *yaml.LoadError
	var les *yaml.LoadErrors
	line, msg, code := 0, "", CodeBadValue
	switch {
	case errors.As(err, &les) && len(les.Errors) > 0:
		le = les.Errors[0]
		line, msg = le.Mark.Line, le.Message
	case errors.As(err, &le):
		line, msg = le.Mark.Line, le.Message
		if le.Stage != "constructor" {
			code = CodeSyntax
		}
	default:
		s := err.Error()
		if !strings.HasPrefix(s, "yaml: ") {
			return err
		}
		msg, code = yamlPrefix().ReplaceAllString(s, ""), CodeSyntax
	}
	msg = yamlPrefix().ReplaceAllString(msg, "")
	if m := lineNumber().FindStringSubmatch(msg); m != nil {
		fmt.Sscan(m[1], &line)
		msg = msg[len(m[0]):]
	}
	if m := notFound().FindStringSubmatch(msg); m != nil {
		return &FieldError{Code: CodeUnknownKey, Line: line, Key: m[1], Problem: fmt.Sprintf("unknown key %q", m[1])}
	}
	if m := cannotDecode().FindStringSubmatch(msg); m != nil {
		return &FieldError{Code: CodeBadValue, Line: line, Problem: fmt.Sprintf("the value %s cannot be used here", strings.Trim(m[2], "`"))}
	}
	if code == CodeSyntax {
		msg = "this is not valid YAML: " + msg
	}
	return &FieldError{Code: code, Line: line, Problem: goTypeName().ReplaceAllString(msg, "a value")}
}
