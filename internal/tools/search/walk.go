package search

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
)

// walkSpec describes one directory walk. The walk visits regular files in
// sorted order (each directory's entries sorted by name, depth first). It
// never visits .git entries, symbolic links or special files, and it
// honours .gitignore files: in every directory under the root, in the
// directories between the repository root and the walk root when the
// root is inside a repository, and the repository's info/exclude. A
// directory holding its own .git starts a fresh rule set, as it is a
// separate repository. Each ignore file is read once per walk. Unreadable
// directories are skipped silently, like rg --no-messages.
type walkSpec struct {
	root string // absolute path of a directory
	// hidden reports whether an entry whose name starts with "." may be
	// visited; nil allows all of them.
	hidden func(name string) bool
	// descend reports whether a directory (segments relative to root)
	// may hold results; nil descends everywhere.
	descend func(rel []string) bool
	// include is grep's file filter, with rg's override semantics.
	include *overrides
	// fence is the call's read fence: a directory it refuses once opened
	// is skipped and added to denied (a refused root fails the walk).
	fence  fstools.Fence
	denied *[]string
	// visit is called for each file, from the walking goroutine; a non-nil
	// error stops the walk and is returned.
	visit func(f fileRef) error
}

// fileRef is one file found by a walk.
type fileRef struct {
	abs   string
	rel   string // slash-separated, relative to the walk root
	entry fs.DirEntry
}

// walkState is what a directory's entries inherit from it.
type walkState struct {
	g *ignores
	// gsegs is the directory's path relative to the base the ignore rules
	// see: the repository root, or the walk root outside a repository.
	gsegs []string
	// rsegs is the directory's path relative to the walk root.
	rsegs []string
}

// walk runs the spec. It returns ctx's error when ctx ends first.
func walk(ctx context.Context, spec *walkSpec) error {
	return walkDir(ctx, spec, spec.root, "", rootState(spec.root), true)
}

// rootState is the state of a walk's root: the rules of the enclosing
// repository, of the .gitignore files between its root and the walk
// root, and of the walk root's own .gitignore.
func rootState(root string) walkState {
	st := walkState{g: &ignores{}}
	if repo := findRepo(root); repo != "" {
		st.g = repoIgnores(repo)
		rel, err := filepath.Rel(repo, root)
		if err == nil && rel != "." {
			// The .gitignore files between the repository root and the
			// walk root apply too; the root's own is added last.
			st.gsegs = strings.Split(filepath.ToSlash(rel), "/")
			dir := repo
			for i, s := range st.gsegs[:len(st.gsegs)-1] {
				dir = filepath.Join(dir, s)
				st.g = st.g.with(readIgnoreFile(filepath.Join(dir, ".gitignore"), i+1))
			}
			st.g = st.g.with(readIgnoreFile(filepath.Join(root, ".gitignore"), len(st.gsegs)))
		}
	} else {
		st.g = st.g.with(readIgnoreFile(filepath.Join(root, ".gitignore"), 0))
	}
	return st
}

func walkDir(ctx context.Context, spec *walkSpec, dir, rel string, st walkState, isRoot bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := readDir(spec, dir)
	if err != nil {
		if isRoot && isDenied(err) {
			return err
		}
		return nil
	}
	if !isRoot {
		st = enterDir(dir, entries, st)
	}
	// One slice per directory for the children's paths: the last element
	// is overwritten for each entry, which is safe because nothing keeps
	// these slices beyond the recursive call.
	gsegs := append(make([]string, 0, len(st.gsegs)+1), st.gsegs...)
	gsegs = append(gsegs, "")
	rsegs := append(make([]string, 0, len(st.rsegs)+1), st.rsegs...)
	rsegs = append(rsegs, "")
	for _, e := range entries {
		name := e.Name()
		t := e.Type()
		isDir := t.IsDir()
		if name == ".git" || !(isDir || t.IsRegular()) {
			continue
		}
		gsegs[len(gsegs)-1] = name
		rsegs[len(rsegs)-1] = name
		if !admit(spec, st.g, name, gsegs, rsegs, isDir) {
			continue
		}
		childRel := name
		if rel != "" {
			childRel = rel + "/" + name
		}
		abs := filepath.Join(dir, name)
		if isDir {
			if spec.descend != nil && !spec.descend(rsegs) {
				continue
			}
			child := walkState{g: st.g, gsegs: gsegs, rsegs: rsegs}
			if err := walkDir(ctx, spec, abs, childRel, child, false); err != nil {
				return err
			}
			continue
		}
		if err := spec.visit(fileRef{abs: abs, rel: childRel, entry: e}); err != nil {
			return err
		}
	}
	return nil
}

// readDir lists dir, sorted, after the fence checked the directory it
// opened: the walk lists entries by name and a subdirectory may have
// been swapped for a symlink since, which the open would follow.
func readDir(spec *walkSpec, dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := spec.fence.CheckOpened(dir, f); err != nil {
		if spec.denied != nil {
			*spec.denied = append(*spec.denied, dir)
		}
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// isDenied reports whether err is the read fence's refusal.
func isDenied(err error) bool {
	var te *tool.Error
	return errors.As(err, &te) && te.Code == fstools.CodeAccessDenied
}

// deniedNote tells the model which directories a search skipped because
// the sandbox denies reading them; "" when none.
func deniedNote(denied []string) string {
	if len(denied) == 0 {
		return ""
	}
	const shown = 5
	list := strings.Join(denied[:min(len(denied), shown)], ", ")
	if len(denied) > shown {
		list += fmt.Sprintf(" and %d more", len(denied)-shown)
	}
	return "\n[sandbox: skipped what the sandbox denies reading: " + list + "]"
}

// admit applies the include overrides, the hidden rule and the ignore
// rules to one entry, in rg's order: an include whitelist wins over
// everything else.
func admit(spec *walkSpec, g *ignores, name string, gsegs, rsegs []string, isDir bool) bool {
	switch spec.include.match(rsegs, isDir) {
	case overrideWhitelist:
		return true
	case overrideIgnore:
		return false
	}
	if name[0] == '.' && spec.hidden != nil && !spec.hidden(name) {
		return false
	}
	return !g.ignored(gsegs, isDir)
}

// enterDir extends the state with a directory's own ignore rules, or
// restarts it when the directory is the root of a nested repository.
func enterDir(dir string, entries []fs.DirEntry, st walkState) walkState {
	hasIgnore := false
	for _, e := range entries {
		switch e.Name() {
		case ".git":
			st.g = repoIgnores(dir)
			st.gsegs = nil
			return st
		case ".gitignore":
			hasIgnore = true
		}
	}
	if hasIgnore {
		st.g = st.g.with(readIgnoreFile(filepath.Join(dir, ".gitignore"), len(st.gsegs)))
	}
	return st
}

// Override decisions (see overrides.match).
const (
	overrideNone = iota
	overrideWhitelist
	overrideIgnore
)

// overrides is grep's include filter. It follows rg's --glob: globs use
// .gitignore syntax (plus {a,b} alternatives) relative to the search root,
// a plain glob whitelists, a !glob excludes, the last match wins, and a
// whitelist match beats .gitignore. When there is any whitelist glob, a
// file matching none is excluded; directories are still entered.
type overrides struct {
	rules      []rule
	whitelists int
}

func (o *overrides) match(rsegs []string, isDir bool) int {
	if o == nil {
		return overrideNone
	}
	for i := len(o.rules) - 1; i >= 0; i-- {
		if r := &o.rules[i]; r.match(rsegs, isDir) {
			if r.negate {
				return overrideIgnore
			}
			return overrideWhitelist
		}
	}
	if !isDir && o.whitelists > 0 {
		return overrideIgnore
	}
	return overrideNone
}

// parseInclude compiles an include glob. It returns an error message for a
// malformed glob.
func parseInclude(glob string) (*overrides, string) {
	alts, msg := expandBraces(glob)
	if msg != "" {
		return nil, msg
	}
	o := &overrides{}
	for _, a := range alts {
		r, ok := parseRule(a)
		if !ok {
			continue
		}
		o.rules = append(o.rules, r)
		if !r.negate {
			o.whitelists++
		}
	}
	if len(o.rules) == 0 {
		return nil, "include matches nothing"
	}
	return o, ""
}

// expandBraces expands one level of {a,b} alternatives into separate
// globs. Nested groups are refused, as rg refuses them.
func expandBraces(s string) ([]string, string) {
	open := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			if open >= 0 {
				return nil, "nested {} groups are not supported"
			}
			open = i
		case '}':
			if open < 0 {
				return nil, "unmatched }"
			}
			var out []string
			for _, alt := range splitAlternatives(s[open+1 : i]) {
				rest, msg := expandBraces(s[i+1:])
				if msg != "" {
					return nil, msg
				}
				for _, r := range rest {
					out = append(out, s[:open]+alt+r)
				}
			}
			return out, ""
		}
	}
	if open >= 0 {
		return nil, "unclosed {"
	}
	return []string{s}, ""
}

// splitAlternatives splits a brace group's body on unescaped commas.
func splitAlternatives(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case ',':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
