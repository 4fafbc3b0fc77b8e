// Package skills finds agent skills (folders of instructions, scripts and
// references for one kind of task) and offers them to the model: a
// catalog reminder lists every skill's name and description, and the
// skill tool returns one skill's full instructions on demand, so only
// the skills a task needs take up context.
//
// A skill is <root>/<name>/SKILL.md (the folder may bundle other files)
// or a flat <root>/<name>.md, each starting with YAML front matter that
// has at least a name and a description. Roots, in rank order (an
// earlier root wins a name clash): <project>/.dsh/skills,
// <project>/.agents/skills, the configured extra directories,
// $DSH_HOME/skills and ~/.agents/skills. Invalid skills are skipped with
// a warning; they never fail a session.
package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/workspace"
)

// SkillFile is the file that makes a folder a skill.
const SkillFile = "SKILL.md"

// MaxNameLen bounds a skill name.
const MaxNameLen = 64

// maxSkillBytes bounds how much of a skill file is read; a skill larger
// than this is a mistake, not instructions.
const maxSkillBytes = 1 << 20

// nameRE is the kebab-case a skill name must be: it is typed by users
// (/name) and passed as a tool argument, so it stays simple.
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`) })

// Options says where skills are looked for.
type Options struct {
	// Home is $DSH_HOME; its skills directory ranks after the project's.
	// Empty skips it.
	Home string `yaml:"-"`
	// Dirs are extra skill roots, ranked after the project roots and
	// before $DSH_HOME/skills. A relative path is resolved against the
	// project root; a leading ~ is the user's home directory.
	Dirs []string `yaml:"dirs"`
	// AgentsHome is the shared ~/.agents directory whose skills rank
	// last. Empty means $DSH_AGENTS_HOME, else ~/.agents; "-" skips it.
	AgentsHome string `yaml:"agents_home"`
}

// Skill is one discovered skill.
type Skill struct {
	Name        string
	Description string
	// WhenToUse optionally adds when the skill applies.
	WhenToUse string
	// Path is the skill file (SKILL.md or <name>.md).
	Path string
	// Dir is the skill's resource folder: the folder of a SKILL.md, or
	// "" for a flat <name>.md skill, which bundles nothing.
	Dir string
	// Root is the skill root it was found in.
	Root string
	// DisableModelInvocation keeps the skill out of the catalog and the
	// skill tool: only a user can invoke it.
	DisableModelInvocation bool
	// UserInvocable says whether a user may invoke it by name (/name).
	UserInvocable bool
}

// Warning reports a skill that was skipped or shadowed.
type Warning struct {
	Path   string
	Reason string
}

func (w Warning) String() string { return w.Path + ": " + w.Reason }

// frontMatter is the YAML header of a skill file. Both spellings of
// when-to-use are accepted: skills are shared with other harnesses.
type frontMatter struct {
	Name                   string `yaml:"name"`
	Description            string `yaml:"description"`
	WhenToUse              string `yaml:"whenToUse"`
	WhenToUseSnake         string `yaml:"when_to_use"`
	DisableModelInvocation bool   `yaml:"disable-model-invocation"`
	UserInvocable          *bool  `yaml:"user-invocable"`
}

// ProjectRoot returns the nearest ancestor of cwd holding a .git entry,
// or cwd itself (see workspace.ProjectRoot).
func ProjectRoot(cwd string) string { return workspace.ProjectRoot(cwd) }

// Roots returns the skill roots for a session in cwd, in rank order,
// without duplicates. Roots need not exist.
func Roots(cwd string, o Options) []string {
	project := ProjectRoot(cwd)
	userHome, _ := os.UserHomeDir()
	expand := func(p string) string {
		if userHome != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
			p = filepath.Join(userHome, p[1:])
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(project, p)
		}
		return filepath.Clean(p)
	}
	roots := []string{filepath.Join(project, ".dsh", "skills"), filepath.Join(project, ".agents", "skills")}
	for _, d := range o.Dirs {
		if d != "" {
			roots = append(roots, expand(d))
		}
	}
	if o.Home != "" {
		roots = append(roots, filepath.Join(o.Home, "skills"))
	}
	agents := o.AgentsHome
	if agents == "" {
		agents = os.Getenv("DSH_AGENTS_HOME")
	}
	if agents == "" && userHome != "" {
		agents = filepath.Join(userHome, ".agents")
	}
	if agents != "" && agents != "-" {
		roots = append(roots, filepath.Join(expand(agents), "skills"))
	}
	// The same directory reached twice (cwd is the home directory, or a
	// symlink) would only produce spurious clash warnings.
	var out []string
	seen := map[string]bool{}
	for _, r := range roots {
		key := r
		if real, err := filepath.EvalSymlinks(r); err == nil {
			key = real
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, r)
		}
	}
	return out
}

// Discover returns the valid skills for a session in cwd, sorted by name,
// and a warning for every skill file skipped. Skills whose front matter
// sets disable-model-invocation are included (callers filter them).
func Discover(cwd string, o Options) ([]Skill, []Warning) {
	var skills []Skill
	var warns []Warning
	byName := map[string]Skill{}
	for _, root := range Roots(cwd, o) {
		found, w := scanRoot(root)
		warns = append(warns, w...)
		for _, s := range found {
			if prev, dup := byName[s.Name]; dup {
				// Across roots the earlier root wins by design; within one
				// root a clash is a mistake worth reporting.
				if prev.Root == s.Root {
					warns = append(warns, Warning{s.Path, fmt.Sprintf("skill %q is already defined by %s", s.Name, prev.Path)})
				}
				continue
			}
			byName[s.Name] = s
			skills = append(skills, s)
		}
	}
	slices.SortFunc(skills, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return skills, warns
}

// scanRoot reads one root: <name>/SKILL.md folders and flat <name>.md
// files, in directory order.
func scanRoot(root string) ([]Skill, []Warning) {
	entries, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []Warning{{root, "cannot read skill directory: " + err.Error()}}
	}
	var skills []Skill
	var warns []Warning
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		full := filepath.Join(root, name)
		fi, err := os.Stat(full) // follows symlinked skills
		if err != nil {
			continue
		}
		var s Skill
		switch {
		case fi.IsDir():
			path := filepath.Join(full, SkillFile)
			if _, err := os.Stat(path); err != nil {
				continue // not a skill folder
			}
			s, err = parseSkill(path)
			s.Dir = full
		case strings.EqualFold(filepath.Ext(name), ".md") && !strings.EqualFold(name, "README.md"):
			s, err = parseSkill(full)
		default:
			continue
		}
		if err != nil {
			warns = append(warns, Warning{s.Path, err.Error()})
			continue
		}
		s.Root = root
		skills = append(skills, s)
	}
	return skills, warns
}

// parseSkill reads a skill file's front matter. The returned Skill has
// Path set even on error, for the warning.
func parseSkill(path string) (Skill, error) {
	s := Skill{Path: path}
	data, err := readLimited(path)
	if err != nil {
		return s, err
	}
	head, _, err := splitFrontMatter(data)
	if err != nil {
		return s, err
	}
	var fm frontMatter
	if err := yaml.Unmarshal(head, &fm); err != nil {
		return s, fmt.Errorf("invalid front matter: %v", err)
	}
	s.Name = strings.TrimSpace(fm.Name)
	s.Description = strings.Join(strings.Fields(fm.Description), " ")
	switch {
	case s.Name == "":
		return s, errors.New("front matter has no name")
	case len(s.Name) > MaxNameLen || !nameRE().MatchString(s.Name):
		return s, fmt.Errorf("name %q must be kebab-case (a-z, 0-9, single hyphens), at most %d characters", s.Name, MaxNameLen)
	case s.Description == "":
		return s, errors.New("front matter has no description")
	}
	s.WhenToUse = strings.Join(strings.Fields(fm.WhenToUse+" "+fm.WhenToUseSnake), " ")
	s.DisableModelInvocation = fm.DisableModelInvocation
	s.UserInvocable = fm.UserInvocable == nil || *fm.UserInvocable
	return s, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSkillBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSkillBytes {
		return nil, fmt.Errorf("skill file is larger than %d bytes", maxSkillBytes)
	}
	return data, nil
}

// splitFrontMatter splits "---\n<yaml>\n---\n<body>". A byte-order mark
// and CRLF line ends are tolerated.
func splitFrontMatter(data []byte) (head, body []byte, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return nil, nil, errors.New("no YAML front matter (the file must start with a --- line)")
	}
	for off := 0; ; {
		line, next := rest[off:], len(rest)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		if t := string(bytes.TrimRight(line, " \t")); t == "---" || t == "..." {
			return rest[:off], rest[next:], nil
		}
		if next >= len(rest) {
			return nil, nil, errors.New("front matter is not closed by a --- line")
		}
		off = next
	}
}

// Instructions re-reads a skill file and returns its body (everything
// after the front matter), trimmed. Re-reading means an edited skill is
// picked up without restarting the session.
func Instructions(s Skill) (string, error) {
	data, err := readLimited(s.Path)
	if err != nil {
		return "", err
	}
	_, body, err := splitFrontMatter(data)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(body)), nil
}
