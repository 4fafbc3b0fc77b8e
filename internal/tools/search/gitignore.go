package search

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// This file implements .gitignore matching as documented in gitignore(5):
// blank lines and # comments, trailing spaces unless escaped, ! negation,
// a trailing / for directories only, a leading or middle / anchoring the
// pattern to the file's directory, *, ?, bracket expressions (with ! or ^
// negation, ranges and POSIX classes) that never match /, and ** as a
// whole segment. The last matching rule in a file decides, and a deeper
// file is consulted before a shallower one, then .git/info/exclude.

// rule is one parsed .gitignore line.
type rule struct {
	negate  bool
	dirOnly bool
	// anchored rules are matched against the path relative to the
	// .gitignore's directory; the others against the base name only,
	// which is what "matches at any level" means.
	anchored bool
	// segs is the pattern split on "/", escapes still in place; an
	// unanchored rule has exactly one.
	segs []string
}

// parseIgnore parses the contents of a .gitignore (or info/exclude) file.
func parseIgnore(data []byte) []rule {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // git skips a UTF-8 BOM
	var rules []rule
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if r, ok := parseRule(string(line)); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

func parseRule(line string) (rule, bool) {
	// Files written on Windows end lines in CRLF; the CR is never meant
	// to be part of the pattern.
	line = strings.TrimSuffix(line, "\r")
	if line == "" || line[0] == '#' {
		return rule{}, false
	}
	line = trimTrailingSpaces(line)
	var r rule
	if line != "" && line[0] == '!' {
		r.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if strings.HasPrefix(line, "/") {
		r.anchored = true
		line = line[1:]
	} else if strings.Contains(line, "/") {
		r.anchored = true
	}
	if line == "" {
		return rule{}, false
	}
	r.segs = strings.Split(line, "/")
	// "**/name" means "name at any depth", which is exactly an unanchored
	// rule; the base-name test is much cheaper than the segment walk.
	if r.anchored && len(r.segs) == 2 && r.segs[0] == "**" && r.segs[1] != "**" {
		r.anchored = false
		r.segs = r.segs[1:]
	}
	return r, true
}

// trimTrailingSpaces drops trailing spaces that are not escaped with a
// backslash.
func trimTrailingSpaces(s string) string {
	end := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
		case '\\':
			i++
			end = min(i+1, len(s))
		default:
			end = i + 1
		}
	}
	return s[:end]
}

// match reports whether the rule matches a path given as its segments
// relative to the rule's directory.
func (r *rule) match(segs []string, isDir bool) bool {
	if r.dirOnly && !isDir {
		return false
	}
	if !r.anchored {
		return matchSeg(r.segs[0], segs[len(segs)-1])
	}
	return matchSegs(r.segs, segs)
}

// matchSegs matches pattern segments against path segments. A "**"
// segment matches any number of path segments, but at the end of the
// pattern at least one: "abc/**" matches everything inside abc, not abc.
func matchSegs(pat, path []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			from := 0
			if len(rest) == 0 {
				from = 1
			}
			for i := from; i <= len(path); i++ {
				if matchSegs(rest, path[i:]) {
					return true
				}
			}
			return false
		}
		if len(path) == 0 || !matchSeg(pat[0], path[0]) {
			return false
		}
		pat, path = pat[1:], path[1:]
	}
	return len(path) == 0
}

// matchSeg matches one pattern segment against one path segment: * is any
// run of bytes, ? one byte, [...] a bracket expression matching one byte
// and \x the character x. Like git (and rg's globs), it works on bytes,
// so ? does not match a two-byte "é". It backtracks only to the last
// star, which keeps it linear in practice.
func matchSeg(p, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				starPx, starSx = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					px, sx = px+1, sx+1
					continue
				}
			case '[':
				if sx < len(s) {
					ok, n, valid := matchClass(p[px:], s[sx])
					if !valid {
						return false // git never matches a malformed bracket expression
					}
					if ok {
						px, sx = px+n, sx+1
						continue
					}
				}
			case '\\':
				// A trailing backslash matches nothing.
				if px+1 < len(p) && sx < len(s) && p[px+1] == s[sx] {
					px, sx = px+2, sx+1
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px, sx = px+1, sx+1
					continue
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			// Let the last star eat one more byte and retry.
			starSx++
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	return true
}

// matchClass matches byte c against the bracket expression at the start
// of p. It returns whether c matched, how many bytes of p the expression
// spans, and whether the expression is well formed.
func matchClass(p string, c byte) (matched bool, n int, valid bool) {
	r := rune(c)
	i := 1
	negate := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negate = true
		i++
	}
	first := true
	for {
		if i >= len(p) {
			return false, 0, false
		}
		if p[i] == ']' && !first {
			return matched != negate, i + 1, true
		}
		first = false
		if p[i] == '[' && i+1 < len(p) && p[i+1] == ':' {
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				in, ok := posixClass(p[i+2:i+2+end], c)
				if !ok {
					return false, 0, false
				}
				matched = matched || in
				i += 2 + end + 2
				continue
			}
		}
		lo, w := classChar(p[i:])
		i += w
		hi := lo
		if i+1 < len(p) && p[i] == '-' && p[i+1] != ']' {
			hi, w = classChar(p[i+1:])
			i += 1 + w
		}
		if lo <= r && r <= hi {
			matched = true
		}
	}
}

// classChar decodes one possibly escaped character of a bracket
// expression.
func classChar(p string) (rune, int) {
	if p[0] == '\\' && len(p) > 1 {
		r, w := utf8.DecodeRuneInString(p[1:])
		return r, w + 1
	}
	return utf8.DecodeRuneInString(p)
}

// posixClass reports whether c is in the named [:class:] of the C
// locale; ok is false for an unknown name.
func posixClass(name string, c byte) (in, ok bool) {
	isUpper := 'A' <= c && c <= 'Z'
	isLower := 'a' <= c && c <= 'z'
	isDigit := '0' <= c && c <= '9'
	isPunct := c > ' ' && c < 0x7f && !isUpper && !isLower && !isDigit
	switch name {
	case "alnum":
		return isUpper || isLower || isDigit, true
	case "alpha":
		return isUpper || isLower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < ' ' || c == 0x7f, true
	case "digit":
		return isDigit, true
	case "graph":
		return c > ' ' && c < 0x7f, true
	case "lower":
		return isLower, true
	case "print":
		return c >= ' ' && c < 0x7f, true
	case "punct":
		return isPunct, true
	case "space":
		return c == ' ' || ('\t' <= c && c <= '\r'), true
	case "upper":
		return isUpper, true
	case "xdigit":
		return isDigit || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F'), true
	}
	return false, false
}

// ignoreFile is the parsed rules of one .gitignore, placed in the tree.
type ignoreFile struct {
	// depth is how many path segments lie between the repository (or
	// walk) base and the file's directory; the rules see a path with
	// those segments removed.
	depth int
	rules []rule
}

// decide returns whether the file has a rule matching the path, and if so
// whether that last matching rule ignores it.
func (f *ignoreFile) decide(segs []string, isDir bool) (matched, ignored bool) {
	if f == nil || len(segs) <= f.depth {
		return false, false
	}
	rel := segs[f.depth:]
	for i := len(f.rules) - 1; i >= 0; i-- {
		if r := &f.rules[i]; r.match(rel, isDir) {
			return true, !r.negate
		}
	}
	return false, false
}

// ignores is the set of ignore files in force for one directory of a
// walk. It is immutable: entering a subdirectory makes a new value that
// shares the parent's files, so sibling directories never see each
// other's rules.
type ignores struct {
	files   []*ignoreFile // shallowest first
	exclude *ignoreFile   // .git/info/exclude of the repository, if any
}

// with returns the set extended by f (nil f: the same set).
func (g *ignores) with(f *ignoreFile) *ignores {
	if f == nil {
		return g
	}
	n := &ignores{exclude: g.exclude, files: make([]*ignoreFile, len(g.files), len(g.files)+1)}
	copy(n.files, g.files)
	n.files = append(n.files, f)
	return n
}

// ignored reports whether the path (segments relative to the base) is
// ignored. The deepest file with a matching rule decides; exclude comes
// last.
func (g *ignores) ignored(segs []string, isDir bool) bool {
	for i := len(g.files) - 1; i >= 0; i-- {
		if m, ig := g.files[i].decide(segs, isDir); m {
			return ig
		}
	}
	_, ig := g.exclude.decide(segs, isDir)
	return ig
}

// readIgnoreFile loads dir/.gitignore; a missing or unreadable file, or one
// without rules, gives nil.
func readIgnoreFile(path string, depth int) *ignoreFile {
	data, err := readSmallFile(path)
	if err != nil {
		return nil
	}
	rules := parseIgnore(data)
	if len(rules) == 0 {
		return nil
	}
	return &ignoreFile{depth: depth, rules: rules}
}

// findRepo returns the nearest directory at or above dir that holds a .git
// entry, or "" when dir is not inside a repository.
func findRepo(dir string) string {
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// gitDir resolves the git directory of a repository root: .git itself, or
// the directory a .git file ("gitdir: ...") points to in worktrees and
// submodules. For a linked worktree the shared (common) directory is
// returned, since that is where info/exclude lives.
func gitDir(repo string) string {
	dot := filepath.Join(repo, ".git")
	fi, err := os.Stat(dot)
	if err != nil {
		return ""
	}
	if fi.IsDir() {
		return dot
	}
	data, err := readSmallFile(dot)
	if err != nil {
		return ""
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return ""
	}
	dir := strings.TrimSpace(target)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(repo, dir)
	}
	if common, err := readSmallFile(filepath.Join(dir, "commondir")); err == nil {
		c := strings.TrimSpace(string(common))
		if !filepath.IsAbs(c) {
			c = filepath.Join(dir, c)
		}
		return filepath.Clean(c)
	}
	return dir
}

// repoIgnores returns the ignore set for a repository root: its
// info/exclude and its own .gitignore.
func repoIgnores(repo string) *ignores {
	g := &ignores{}
	if gd := gitDir(repo); gd != "" {
		g.exclude = readIgnoreFile(filepath.Join(gd, "info", "exclude"), 0)
	}
	return g.with(readIgnoreFile(filepath.Join(repo, ".gitignore"), 0))
}
