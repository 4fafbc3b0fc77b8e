package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// maxSymlinks bounds symlink expansion in resolvePath, like the kernel's
// ELOOP limit, so that a symlink cycle cannot spin forever.
const maxSymlinks = 40

// resolvePath returns the absolute path that p designates once every
// symlink in its longest existing prefix is followed. The part that does
// not exist yet is appended lexically: nothing can redirect it, because a
// path that does not exist cannot be a symlink. Relative paths are taken
// relative to base.
//
// It resolves component by component instead of cleaning first, because
// "link/.." means "the parent of the link's target" to the kernel, not
// "the directory holding the link".
func resolvePath(base, p string) (string, error) {
	if !filepath.IsAbs(p) {
		if !filepath.IsAbs(base) {
			return "", fmt.Errorf("relative path %q without an absolute base", p)
		}
		// Not filepath.Join: it would clean "link/.." away lexically.
		p = base + "/" + p
	}
	rest := splitPath(p)
	cur := "/"
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == ".." {
			// cur holds no symlinks, so its lexical parent is its real
			// parent.
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		// ENOTDIR: a prefix is a file, so this path cannot exist either.
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", fmt.Errorf("resolve %s: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(splitPath(target), rest...)
	}
	return cur, nil
}

func splitPath(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// within reports whether p is dir or lies beneath it. Both must be clean
// absolute paths.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// withinAny returns the first of dirs that holds p, or "".
func withinAny(p string, dirs []string) string {
	for _, d := range dirs {
		if within(p, d) {
			return d
		}
	}
	return ""
}

// tempDirs lists the temp areas that workspace-write makes writable:
// os.TempDir() (which honours $TMPDIR) plus /tmp and /var/tmp when they
// exist, because compilers, package managers and mktemp write there
// whatever TMPDIR says. They are resolved and de-duplicated.
func tempDirs() []string {
	var out []string
	for _, d := range []string{os.TempDir(), "/tmp", "/var/tmp"} {
		r, err := resolvePath("/", d)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
			continue
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// scratchDir returns the private TMPDIR of read-only mode, creating it on
// first use. Read-only keeps the host's temp dirs read-only (so commands
// can still read what is there, as every mode promises) and points TMPDIR
// at this directory instead, so that compilers and mktemp keep working.
// It is per user and reused, so only commands confined outside a
// Session use it (probes, direct Sandbox.Confine callers): a Session's
// commands get the session's own directory (newSessionTmp).
func scratchDir() (string, error) {
	base, err := resolvePath("/", os.TempDir())
	if err != nil {
		return "", err
	}
	uid := os.Getuid()
	dir := filepath.Join(base, fmt.Sprintf("dsh-sandbox-tmp-%d", uid))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("sandbox scratch dir: %w", err)
	}
	// Someone else could have planted the name in a shared /tmp: only a
	// real directory that we own and that nobody else can write is used.
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("sandbox scratch dir: %w", err)
	}
	if !fi.IsDir() || !ownedBy(fi, uid) || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("sandbox scratch dir %s is not a private directory of uid %d", dir, uid)
	}
	return dir, nil
}

// sessionTmpPrefix starts the name of a session's private TMPDIR.
const sessionTmpPrefix = "dsh-sandbox-session-"

// newSessionTmp creates a session's private TMPDIR: a fresh directory
// (0700, a random name) in the resolved os.TempDir(), the temp area that
// workspace-write grants anyway, so that nothing one session (or one
// mode) leaves there is seen by another. Session.Close removes it; the
// name carries the uid and dsh's pid, so that the directories of a dsh
// that died without closing (kill -9) are removed by the next one
// (sweepSessionTmps).
func newSessionTmp() (string, error) {
	base, err := resolvePath("/", os.TempDir())
	if err != nil {
		return "", fmt.Errorf("sandbox TMPDIR: %w", err)
	}
	sweepSessionTmps(base)
	dir, err := os.MkdirTemp(base, fmt.Sprintf("%s%d-%d-", sessionTmpPrefix, os.Getuid(), os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("sandbox TMPDIR: %w", err)
	}
	return dir, nil
}

// sweepSessionTmps removes, from base, the session TMPDIRs of this user
// whose dsh process is gone: real directories owned by the user, named
// for a pid that no longer exists.
func sweepSessionTmps(base string) {
	prefix := fmt.Sprintf("%s%d-", sessionTmpPrefix, os.Getuid())
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && ownedBy(fi, os.Getuid()) {
			_ = removeTree(dir)
		}
	}
}

// removeTree removes dir and everything in it, making directories that
// a command left without write or search permission (chmod 0) writable
// first, as a non-root owner must.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() && d.Type()&fs.ModeSymlink == 0 {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// tmp is the command's TMPDIR: the session's private one, or, for a
// command confined outside a Session, the per-user scratchDir.
func (p Policy) tmp() (string, error) {
	if p.sessionTmp != "" {
		return p.sessionTmp, nil
	}
	return scratchDir()
}

// layout is what a policy makes writable, resolved against the live
// filesystem. Both backends build their confinement from it, and
// CheckWrite uses the same roots and protected paths.
type layout struct {
	// roots are the resolved Workspace and WritableRoots that exist.
	roots []string
	// temps are the temp areas (workspace-write) granted whole.
	temps []string
	// scratch is read-only mode's private TMPDIR.
	scratch string
	// tmpdir is workspace-write's TMPDIR: the same private directory,
	// inside a temp dir that is writable anyway. Unlike the shared temp
	// dirs, where host daemons keep sockets (tmux, X11, ssh-agent), its
	// UNIX sockets are reachable; so nothing may be linked or moved into
	// it from them (bubblewrap binds it on its own, Landlock grants the
	// right to reparent files only there and in the roots).
	tmpdir string
	// protected are the .git entries (and the git dirs they point to)
	// of the roots, their agent configuration (configPaths) and the
	// policy's Protected paths: they stay read-only although their
	// parent is writable.
	protected []string
	// reads is what may not be read, or all that may (readlayout.go).
	reads readLayout
}

// newLayout resolves p. Workspace must exist in workspace-write; missing
// WritableRoots are skipped (nothing can be bound or granted there).
func newLayout(p Policy) (layout, error) {
	var l layout
	switch p.Mode {
	case ReadOnly:
		dir, err := p.tmp()
		if err != nil {
			return l, err
		}
		l.scratch = dir
		l.reads = newReadLayout(p, []string{dir})
		return l, nil
	case WorkspaceWrite:
	default:
		return l, fmt.Errorf("sandbox: no confinement for mode %q", p.Mode)
	}
	ws, err := workspaceRoot(p)
	if err != nil {
		return l, err
	}
	l.roots = []string{ws}
	for _, r := range p.WritableRoots {
		rr, err := resolvePath(ws, r)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(rr); err != nil || !fi.IsDir() {
			continue
		}
		if !slices.Contains(l.roots, rr) {
			l.roots = append(l.roots, rr)
		}
	}
	for _, r := range l.roots {
		l.protected = append(l.protected, gitPaths(r)...)
		l.protected = append(l.protected, configProtected(r)...)
	}
	l.protected = append(l.protected, policyProtected(p, ws)...)
	// A root that is a temp dir is handled as one (granted whole), its
	// .git still protected where the backend can.
	l.temps = tempDirs()
	if dir, err := p.tmp(); err == nil && withinAny(dir, l.temps) != "" {
		l.tmpdir = dir
	}
	l.roots = slices.DeleteFunc(l.roots, func(r string) bool { return slices.Contains(l.temps, r) })
	// A worktree's common dir may lie outside every writable area, where
	// it is read-only anyway.
	l.protected = slices.DeleteFunc(l.protected, func(g string) bool {
		return withinAny(g, l.roots) == "" && withinAny(g, l.temps) == ""
	})
	slices.Sort(l.protected)
	l.protected = slices.Compact(l.protected)
	l.reads = newReadLayout(p, slices.Concat(l.roots, l.temps, []string{l.tmpdir}))
	return l, nil
}

// workspaceRoot validates and resolves Policy.Workspace.
func workspaceRoot(p Policy) (string, error) {
	if p.Workspace == "" || !filepath.IsAbs(p.Workspace) {
		return "", fmt.Errorf("sandbox: workspace-write needs an absolute workspace, got %q", p.Workspace)
	}
	ws, err := resolvePath("/", p.Workspace)
	if err != nil {
		return "", fmt.Errorf("sandbox: workspace: %w", err)
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return "", fmt.Errorf("sandbox: workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("sandbox: workspace %s is not a directory", ws)
	}
	return ws, nil
}

// gitPaths returns the git metadata of root that must stay read-only:
// root/.git itself (a directory, a worktree's "gitdir:" file, or a
// symlink's target) and, for a worktree, its git dir and the common dir
// it shares with the main checkout. Writes there would let a command plant
// hooks or config (core.fsmonitor, core.pager) that run unconfined the
// next time the user runs git.
func gitPaths(root string) []string {
	dotgit := filepath.Join(root, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil {
		return nil
	}
	out := []string{dotgit}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := resolvePath("/", dotgit)
		if err != nil {
			return out
		}
		out = append(out, t)
		if fi, err = os.Stat(t); err != nil || fi.IsDir() {
			return out
		}
		dotgit = t
	}
	if !fi.Mode().IsRegular() {
		return out
	}
	gitdir := readGitPointer(dotgit, "gitdir:")
	if gitdir == "" {
		return out
	}
	out = append(out, gitdir)
	if common := readGitPointer(filepath.Join(gitdir, "commondir"), ""); common != "" {
		out = append(out, common)
	}
	return out
}

// readGitPointer reads a one-line git pointer file ("gitdir: X" in a
// worktree's .git, a bare "X" in commondir) and resolves X relative to
// the file's directory. It returns "" when the file or its target is
// missing.
func readGitPointer(file, prefix string) string {
	b, err := os.ReadFile(file)
	if err != nil || len(b) > 4096 {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if !ok {
		return ""
	}
	target = strings.TrimSpace(target)
	if target == "" {
		return ""
	}
	r, err := resolvePath(filepath.Dir(file), target)
	if err != nil {
		return ""
	}
	if _, err := os.Stat(r); err != nil {
		return ""
	}
	return r
}

// selfExecutable is os.Executable, read once: every confined command's
// command line names this binary, several times over, and the path of a
// running process's binary does not change.
var selfExecutable = sync.OnceValues(os.Executable)
