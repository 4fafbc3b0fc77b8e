package strreplace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
	"github.com/dsh-dev/dsh/internal/tools/search"
)

// ignoredNote follows an ignored directory in a listing.
const ignoredNote = " (ignored: contents not listed)"

// alwaysIgnored are directory names whose contents are never worth a
// listing, ignored by .gitignore or not: installed packages and bytecode.
// vendor, build, dist and target are not among them, since a Go vendor
// tree or a build/ of sources may be real code; they are ignored when
// .gitignore says so, or (Cargo's target) when tagged as a cache.
var alwaysIgnored = map[string]bool{"node_modules": true, "__pycache__": true}

// listDir lists the non-hidden entries of dir up to two levels deep, like
// `find dir -maxdepth 2 -not -path '*/.*'`, directories marked with a
// trailing slash. An ignored directory is listed on one line, marked, and
// not entered (see ignoredDir).
func listDir(o Options, fc fstools.Fence, dir string) (string, error) {
	entries, err := readDir(fc, dir)
	if isDenied(err) {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Here's the files and directories up to 2 levels deep in %s, excluding hidden items and the contents of ignored directories:\n%s\n", dir, dir)
	l := lister{o: o, b: &b}
	root := search.IgnoreRoot(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if !e.IsDir() {
			if !l.line(p) {
				break
			}
			continue
		}
		if ignoredDir(root, e.Name(), p) {
			if !l.line(p + "/" + ignoredNote) {
				break
			}
			continue
		}
		if !l.line(p + "/") {
			break
		}
		// An unreadable subdirectory is listed without its contents
		// rather than failing the whole view.
		sub, err := readDir(fc, p)
		if isDenied(err) {
			// A denied subdirectory is named, its contents never.
			if !l.line(p + "/" + deniedNote) {
				break
			}
			continue
		}
		ig := root.Enter(e.Name(), sub)
		for _, s := range sub {
			if strings.HasPrefix(s.Name(), ".") {
				continue
			}
			q := filepath.Join(p, s.Name())
			switch {
			case !s.IsDir():
			case ignoredDir(ig, s.Name(), q):
				q += "/" + ignoredNote
			default:
				q += "/"
			}
			if !l.line(q) {
				break
			}
		}
		if l.clipped {
			break
		}
	}
	if l.clipped {
		b.WriteString(clippedNote)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// deniedNote follows a directory the sandbox policy does not let the
// tools read.
const deniedNote = " (denied by the sandbox: contents not listed)"

// readDir lists dir under the fence: the path is checked, then the
// opened directory (its descriptor's real name), so a symlink swapped in
// between cannot list a denied directory.
func readDir(fc fstools.Fence, dir string) ([]os.DirEntry, error) {
	if err := fc.CheckRead(dir); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := fc.CheckOpened(dir, f); err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// isDenied reports whether err is the fence's refusal.
func isDenied(err error) bool {
	var te *tool.Error
	return errors.As(err, &te) && te.Code == fstools.CodeAccessDenied
}

// lister writes listing lines within the output bounds.
type lister struct {
	o       Options
	b       *strings.Builder
	n       int
	clipped bool
}

// line adds one line, or reports false (and clipped) when it would pass
// the bounds.
func (l *lister) line(s string) bool {
	if l.clipped || l.n == maxListed || l.b.Len()+len(s) >= l.o.MaxOutputChars {
		l.clipped = true
		return false
	}
	l.n++
	l.b.WriteString(s)
	l.b.WriteByte('\n')
	return true
}

// ignoredDir reports whether the directory name at path, in a directory
// whose git rules are ig, is one whose contents a listing leaves out:
//   - git ignores it (.gitignore files, .git/info/exclude);
//   - it is node_modules or __pycache__;
//   - it holds CACHEDIR.TAG (the Cache Directory Tagging convention,
//     which Cargo's target/ and many tool caches follow) or pyvenv.cfg
//     (a Python virtual environment, whatever its name).
func ignoredDir(ig search.IgnoreDir, name, path string) bool {
	if alwaysIgnored[name] || ig.Ignored(name, true) {
		return true
	}
	for _, marker := range []string{"CACHEDIR.TAG", "pyvenv.cfg"} {
		if _, err := os.Lstat(filepath.Join(path, marker)); err == nil {
			return true
		}
	}
	return false
}
