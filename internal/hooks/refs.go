package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// A trusted project hooks file is only as trustworthy as the repository
// files its commands run: a hooks.json that runs .dsh/check.sh hands the
// script to whoever can rewrite it, and a sandboxed agent can write the
// workspace. Trust therefore records, next to the hooks file, the SHA-256
// of every repository file its commands name, and a hook runs only while
// all of them are unchanged.
//
// Finding what a command runs is conservative rather than clever: every
// word of the command (shell quoting undone, nested quoted commands split
// again, "--opt=value" and "a:b" split at the separator, the project
// variables expanded) that names an existing file inside the repository
// counts, whether the command executes it, sources it or passes it to an
// interpreter. What a named program then reads on its own (a Makefile,
// package.json scripts, imported modules) is not followed.

// MaxReferenced bounds the size of one referenced file: it is hashed
// before every hook run.
const MaxReferenced = 64 << 20

// maxBases bounds the directories relative words are looked up in.
const maxBases = 64

// maxWordDepth bounds how often a quoted word is split again as a command
// of its own (sh -c "bash 'x.sh'").
const maxWordDepth = 4

// commandWords returns the candidate path words of a shell command.
func commandWords(cmd string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(s string, depth int)
	walk = func(s string, depth int) {
		for _, w := range shellWords(s) {
			for _, part := range splitWord(w) {
				if part != "" && !seen[part] {
					seen[part] = true
					out = append(out, part)
				}
			}
			// A word that is itself a command line (the argument of sh -c,
			// a quoted pipeline) is split again.
			if depth < maxWordDepth && strings.ContainsAny(w, " \t\n;&|<>()`'\"") {
				walk(w, depth+1)
			}
		}
	}
	walk(cmd, 0)
	return out
}

// splitWord returns w and its pieces at '=' and ':' (an option's value,
// a search path): the whole word may be the path as well.
func splitWord(w string) []string {
	out := []string{w}
	for _, f := range strings.FieldsFunc(w, func(r rune) bool { return r == '=' || r == ':' }) {
		if f != w {
			out = append(out, f)
		}
	}
	return out
}

// shellWords splits s into words as a POSIX shell would before
// expansion: blanks and operators separate, quotes and backslashes are
// undone, and the text inside $( ) and backquotes is split too (the
// operators around it separate). It never fails: unbalanced quotes end
// the word at the end of the input.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			inWord = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				cur.WriteString(s[i+1:])
				i = len(s)
				break
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
		case strings.IndexByte(" \t\n;&|<>()`", c) >= 0:
			flush()
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	flush()
	return words
}

// expandProjectVars replaces the variables dsh sets for hooks that name
// directories ($CLAUDE_PROJECT_DIR, $DSH_PROJECT_DIR, their ${} forms,
// and $PWD, the directory hooks run in) in w.
func expandProjectVars(w, projectDir, cwd string) string {
	if !strings.Contains(w, "$") {
		return w
	}
	r := strings.NewReplacer(
		"${CLAUDE_PROJECT_DIR}", projectDir, "$CLAUDE_PROJECT_DIR", projectDir,
		"${DSH_PROJECT_DIR}", projectDir, "$DSH_PROJECT_DIR", projectDir,
		"${PWD}", cwd, "$PWD", cwd,
	)
	return r.Replace(w)
}

// ref is one repository file a hooks file's commands name.
type ref struct {
	// Path is the absolute path the command names (lexically cleaned).
	Path string
	// Target is where it leads once symbolic links are resolved.
	Target string
	// Digest is the SHA-256 of its content.
	Digest string
}

// Change kinds of a referenced file since it was trusted.
const (
	ChangeChanged = "changed"
	ChangeDeleted = "deleted"
	ChangeNew     = "new"
	// ChangeOutside: it leads out of the repository (a symbolic link).
	ChangeOutside = "outside"
	// ChangeUnreadable: it cannot be verified (not a regular file, too
	// large, unreadable).
	ChangeUnreadable = "unreadable"
)

// Change is one reason a trusted hooks file's hooks are suspended.
type Change struct {
	// Path is the absolute path of the file.
	Path string `json:"path"`
	// Kind is one of the Change* constants.
	Kind string `json:"kind"`
	// Detail says more (why a file is unreadable, where a link leads).
	Detail string `json:"detail,omitempty"`
}

// scanRefs finds the repository files named by commands, resolving
// relative words against the project directory and cwd (where hooks
// run). A named file that cannot be
// trusted (a link out of the repository, not a regular file, too large)
// is returned as a change: such a hooks file cannot be trusted.
func scanRefs(commands []string, projectDir, cwd string) (refs map[string]ref, bad []Change) {
	return scan(commands, projectDir, cwd, true)
}

// scan is scanRefs; hash false leaves the digests out (to list the
// files, not to verify them).
func scan(commands []string, projectDir, cwd string, hash bool) (refs map[string]ref, bad []Change) {
	refs = map[string]ref{}
	root, err := filepath.EvalSymlinks(projectDir)
	if err != nil {
		root = projectDir
	}
	if cwd == "" {
		cwd = projectDir
	}
	bases := []string{projectDir}
	if cwd != projectDir {
		bases = append(bases, cwd)
	}
	var words []string
	for _, c := range commands {
		for _, w := range commandWords(c) {
			words = append(words, expandProjectVars(w, projectDir, cwd))
		}
	}
	candidates := func(w string) []string {
		var out []string
		if filepath.IsAbs(w) {
			out = []string{filepath.Clean(w)}
		} else {
			for _, b := range bases {
				out = append(out, filepath.Join(b, w))
			}
		}
		// A pattern (for f in checks/*.sh) runs whatever matches when the
		// hook runs: each match counts, so a new one is a change.
		if strings.ContainsAny(w, "*?[") {
			var matched []string
			for _, p := range out {
				if m, err := filepath.Glob(p); err == nil {
					matched = append(matched, m...)
				}
			}
			out = append(out, matched...)
		}
		return out
	}
	// A repository directory a command names (cd tools && ./x.sh, make -C
	// sub) is where its relative words may be looked up too.
	for _, w := range words {
		for _, p := range candidates(w) {
			if len(bases) >= maxBases || !within(p, projectDir) || slices.Contains(bases, p) {
				continue
			}
			if st, err := os.Stat(p); err == nil && st.IsDir() {
				bases = append(bases, p)
			}
		}
	}
	seen := map[string]bool{}
	for _, w := range words {
		for _, p := range candidates(w) {
			if seen[p] {
				continue
			}
			seen[p] = true
			r, ch, ok := resolveRef(p, projectDir, root, hash)
			if ch != nil {
				bad = append(bad, *ch)
			} else if ok {
				refs[p] = r
			}
		}
	}
	return refs, bad
}

// resolveRef decides whether p is a repository file and hashes it. ok is
// false for what is not (missing, a directory, outside the repository).
func resolveRef(p, projectDir, root string, hash bool) (r ref, ch *Change, ok bool) {
	lexIn := within(p, projectDir)
	if _, err := os.Lstat(p); err != nil {
		return ref{}, nil, false
	}
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		if lexIn {
			// A dangling or looping link inside the repository.
			return ref{}, &Change{Path: p, Kind: ChangeUnreadable, Detail: err.Error()}, false
		}
		return ref{}, nil, false
	}
	tgtIn := within(target, root) || within(target, projectDir)
	if !lexIn && !tgtIn {
		return ref{}, nil, false // not the repository's (/bin/sh, ~/bin/x)
	}
	st, err := os.Stat(target)
	if err != nil || st.IsDir() {
		return ref{}, nil, false
	}
	if lexIn && !tgtIn {
		return ref{}, &Change{Path: p, Kind: ChangeOutside, Detail: "leads to " + target + ", outside the repository"}, false
	}
	if !hash {
		return ref{Path: p, Target: target}, nil, true
	}
	d, err := digestFile(target)
	if err != nil {
		return ref{}, &Change{Path: p, Kind: ChangeUnreadable, Detail: err.Error()}, false
	}
	return ref{Path: p, Target: target, Digest: d}, nil, true
}

// within reports whether p is dir or lies beneath it (lexically).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

var errNotRegular = errors.New("not a regular file")

// digestFile hashes a regular file of at most MaxReferenced bytes. It
// opens without blocking and checks what it opened, so a FIFO or device
// put in a script's place cannot hang or feed the check.
func digestFile(path string) (string, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %w", path, errNotRegular)
	}
	// Another hard link is another name for the same content, which the
	// sandbox's read-only bind of this name does not cover (a link in a
	// writable temp directory could change it between check and run).
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && uint64(sys.Nlink) > 1 {
		return "", fmt.Errorf("%s has %d hard links: another name could change it, so it cannot be verified (keep one copy)", path, uint64(sys.Nlink))
	}
	if st.Size() > MaxReferenced {
		return "", fmt.Errorf("%s: larger than %d MiB, too large to verify before each run", path, MaxReferenced>>20)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, MaxReferenced+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if n > MaxReferenced {
		return "", fmt.Errorf("%s: grew past %d MiB while read", path, MaxReferenced>>20)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// compareRefs lists how the current references differ from the trusted
// ones: a trusted file changed or deleted, a named file not trusted.
func compareRefs(trusted map[string]string, cur map[string]ref) []Change {
	var out []Change
	for p, r := range cur {
		d, ok := trusted[p]
		switch {
		case !ok:
			out = append(out, Change{Path: p, Kind: ChangeNew})
		case d != r.Digest:
			out = append(out, Change{Path: p, Kind: ChangeChanged})
		}
	}
	for p := range trusted {
		if _, ok := cur[p]; ok {
			continue
		}
		// Trusted but not named from here: what matters is whether it is
		// gone (a command naming it now fails or finds something else).
		if _, err := os.Lstat(p); err != nil {
			out = append(out, Change{Path: p, Kind: ChangeDeleted})
		}
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out
}
