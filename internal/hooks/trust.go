package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Trust is the record of trusted project hook files:
// $DSH_HOME/hooks-trust.json maps each absolute path to the SHA-256 of the
// content that was trusted, so an edited file needs trusting again, and
// (Refs) each such file to the repository files its commands name, with
// their SHA-256, so an edited script does too.
type Trust struct {
	path  string
	Files map[string]string `json:"files"`
	// Refs maps a trusted hooks file to the repository files its commands
	// name (absolute paths) and the SHA-256 of their content when trusted.
	// A record written before Refs existed has none: a hooks file that
	// names repository files then needs trusting again.
	Refs map[string]map[string]string `json:"refs,omitempty"`
}

// LoadTrust reads the trust record of home (an empty one when missing).
func LoadTrust(home string) (*Trust, error) {
	t := &Trust{path: filepath.Join(home, "hooks-trust.json"), Files: map[string]string{}}
	data, err := os.ReadFile(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hooks trust: %w", err)
	}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("hooks trust: %s: %w", t.path, err)
	}
	if t.Files == nil {
		t.Files = map[string]string{}
	}
	return t, nil
}

// Digest is the hex SHA-256 of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Trusted reports whether path was trusted with exactly this content. It
// says nothing of the files its commands name (see Load).
func (t *Trust) Trusted(path string, data []byte) bool {
	return t.Files[path] == Digest(data)
}

// Trusted is what Add trusted.
type Trusted struct {
	// Digest is the hooks file's SHA-256.
	Digest string
	// Refs are the repository files its commands name, sorted, with their
	// digests.
	Refs []TrustedRef
}

// TrustedRef is one referenced file Add trusted.
type TrustedRef struct {
	Path   string
	Digest string
}

// Add trusts the hooks file at path with its current content, and the
// repository files its commands name (relative words resolved against
// projectDir and cwd, where hooks run) with theirs, and saves the record
// atomically. A command naming a repository file that cannot be trusted
// (a link leading out of the repository, not a regular file) is an error
// naming it, and nothing is trusted.
func (t *Trust) Add(path, projectDir, cwd string) (Trusted, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Trusted{}, fmt.Errorf("hooks trust: %w", err)
	}
	// A file that does not parse is not trusted: it would fail at load.
	hs, _, err := Parse(path, data, DialectClaude)
	if err != nil {
		return Trusted{}, err
	}
	refs, bad := scanRefs(commandsOf(hs), projectDir, cwd)
	d := Digest(data)
	// The same hooks file trusted before from another directory (hooks run
	// in the session directory, and relative words are looked up there):
	// the files trusted then are vouched for again with what they hold
	// now, so trusting from one directory does not undo another.
	if t.Files[path] == d {
		root, err := filepath.EvalSymlinks(projectDir)
		if err != nil {
			root = projectDir
		}
		for p := range t.Refs[path] {
			if _, ok := refs[p]; ok {
				continue
			}
			r, ch, ok := resolveRef(p, projectDir, root, true)
			if ch != nil {
				bad = append(bad, *ch)
			} else if ok {
				refs[p] = r
			}
		}
	}
	if len(bad) > 0 {
		return Trusted{}, &SuspendedError{Source: path, ProjectDir: projectDir, Changes: bad, refused: true}
	}
	t.Files[path] = d
	if t.Refs == nil {
		t.Refs = map[string]map[string]string{}
	}
	rec := map[string]string{}
	out := Trusted{Digest: d}
	for p, r := range refs {
		rec[p] = r.Digest
		out.Refs = append(out.Refs, TrustedRef{Path: p, Digest: r.Digest})
	}
	slices.SortFunc(out.Refs, func(a, b TrustedRef) int { return strings.Compare(a.Path, b.Path) })
	t.Refs[path] = rec
	if err := t.save(); err != nil {
		return Trusted{}, err
	}
	return out, nil
}

func (t *Trust) save() error {
	out, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return err
	}
	tmp := t.path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o600); err != nil {
		return fmt.Errorf("hooks trust: %w", err)
	}
	if err := os.Rename(tmp, t.path); err != nil {
		return fmt.Errorf("hooks trust: %w", err)
	}
	return nil
}

func commandsOf(hs []Hook) []string {
	var out []string
	for _, h := range hs {
		if !slices.Contains(out, h.Command) {
			out = append(out, h.Command)
		}
	}
	return out
}

// CodeSuspended is the stable code of a SuspendedError.
const CodeSuspended = "HOOKS_SUSPENDED"

// SuspendedError says why a trusted project hooks file's hooks do not
// run (or, from Add, why it cannot be trusted): the files that changed
// since it was trusted.
type SuspendedError struct {
	// Source is the hooks file.
	Source     string
	ProjectDir string
	Changes    []Change
	refused    bool // from Add: nothing was trusted
}

// Code is CodeSuspended.
func (e *SuspendedError) Code() string { return CodeSuspended }

func (e *SuspendedError) Error() string {
	var parts []string
	for _, c := range e.Changes {
		name := c.Path
		if rel, err := filepath.Rel(e.ProjectDir, c.Path); err == nil && within(c.Path, e.ProjectDir) {
			name = rel
		}
		switch c.Kind {
		case ChangeChanged:
			if c.Detail != "" {
				parts = append(parts, name+" "+c.Detail)
			} else {
				parts = append(parts, name+" changed since it was trusted")
			}
		case ChangeDeleted:
			parts = append(parts, name+" was deleted")
		case ChangeNew:
			parts = append(parts, name+" is run by a hook but was not trusted")
		case ChangeOutside:
			parts = append(parts, name+" "+c.Detail)
		default:
			parts = append(parts, name+" cannot be verified: "+c.Detail)
		}
	}
	if e.refused {
		return fmt.Sprintf("hooks trust: %s cannot be trusted: %s", e.Source, strings.Join(parts, "; "))
	}
	return fmt.Sprintf("project hooks in %s are suspended until trusted again (dsh hooks trust): %s", e.Source, strings.Join(parts, "; "))
}

// Paths are the files the error names, relative to the project where
// they lie in it.
func (e *SuspendedError) Paths() []string {
	var out []string
	for _, c := range e.Changes {
		out = append(out, c.Path)
	}
	return out
}

// guard re-verifies one trusted project hooks file before each of its
// hooks runs: the file still has the content the session loaded, the
// record still trusts that content, and every repository file its
// commands name is the one trusted.
type guard struct {
	home, source, digest, projectDir string
	commands                         []string
}

// check returns nil when the hooks may run, else a *SuspendedError.
func (g *guard) check(cwd string) error {
	susp := func(c ...Change) error {
		return &SuspendedError{Source: g.source, ProjectDir: g.projectDir, Changes: c}
	}
	data, err := os.ReadFile(g.source)
	if err != nil {
		return susp(Change{Path: g.source, Kind: ChangeDeleted})
	}
	if Digest(data) != g.digest {
		return susp(Change{Path: g.source, Kind: ChangeChanged})
	}
	t, err := LoadTrust(g.home)
	if err != nil {
		return susp(Change{Path: filepath.Join(g.home, "hooks-trust.json"), Kind: ChangeUnreadable, Detail: err.Error()})
	}
	if t.Files[g.source] != g.digest {
		if t.Files[g.source] == "" {
			return susp(Change{Path: g.source, Kind: ChangeChanged, Detail: "is no longer trusted"})
		}
		// Trusted again with other content than this session loaded.
		return susp(Change{Path: g.source, Kind: ChangeChanged, Detail: "changed since this session loaded it (a new session loads it)"})
	}
	refs, bad := scanRefs(g.commands, g.projectDir, cwd)
	changes := append(bad, compareRefs(t.Refs[g.source], refs)...)
	if len(changes) > 0 {
		return susp(changes...)
	}
	return nil
}

// ProtectedFiles are the repository files trusted project hooks run (and
// the trusted hooks files themselves), and the repository files the
// user's own hooks name, as absolute paths, for the session's sandbox to
// keep read-only (sandbox.Policy.Protected): a verified script must not
// be rewritten between its check and its run, and a user hook that runs
// a repository script must not run one the agent wrote. Symbolic links
// are given with their targets. Files that no longer exist are left out;
// an unreadable record gives none of the project's.
func ProtectedFiles(o LoadOptions) []string {
	if o.ProjectDir == "" {
		return nil
	}
	t, err := LoadTrust(o.Home)
	if err != nil {
		t = &Trust{}
	}
	root, err := filepath.EvalSymlinks(o.ProjectDir)
	if err != nil {
		root = o.ProjectDir
	}
	var out []string
	add := func(p string) {
		if _, err := os.Lstat(p); err != nil {
			return
		}
		out = append(out, p)
		if tgt, err := filepath.EvalSymlinks(p); err == nil && tgt != p && (within(tgt, root) || within(tgt, o.ProjectDir)) {
			out = append(out, tgt)
		}
	}
	for _, f := range ProjectFiles(o.ProjectDir, o.Import) {
		if _, ok := t.Files[f]; !ok {
			continue
		}
		add(f)
		for p := range t.Refs[f] {
			if within(p, o.ProjectDir) || within(p, root) {
				add(p)
			}
		}
	}
	// The user's own hooks need no trust, but what they run from this
	// repository is the agent's to rewrite unless protected.
	srcs, _ := sources(o)
	for _, s := range srcs {
		if s.project {
			continue
		}
		data, err := os.ReadFile(s.path)
		if err != nil {
			continue
		}
		hs, _, err := Parse(s.path, data, s.dialect)
		if err != nil {
			continue
		}
		refs, _ := scan(commandsOf(hs), o.ProjectDir, o.Cwd, false)
		for p := range refs {
			add(p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
