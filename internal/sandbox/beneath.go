//go:build unix

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrPathChanged is wrapped by the errors of OpenWriteDir and
// CheckOpenedFile when the path changed under the file tool between
// resolving it and opening it (a symlink or directory swapped in by a
// concurrent command); nothing was written or read.
var ErrPathChanged = errors.New("the path changed while it was being opened (a symlink or directory was swapped in concurrently)")

// WriteDir is the directory a file tool's write to a path lands in,
// opened so that it cannot lie outside the workspace or writable root
// that holds the path, whatever a concurrent command does to the
// path's components. The tool creates its temporary file and renames
// it relative to Dir (openat/renameat), never by name.
type WriteDir struct {
	// Dir is the open directory (O_PATH on Linux).
	Dir *os.File
	// Name is the final component to write, in Dir.
	Name string
	// Path is the directory's real path when it was checked.
	Path string
}

// Close closes Dir.
func (w *WriteDir) Close() error { return w.Dir.Close() }

// OpenWriteDir opens, race-free, the directory that a write to path
// lands in, for a file tool that then writes relative to it. It is the
// write fence (CheckWrite) made one operation with the write: the path
// is checked, its parent is opened beneath the workspace or writable
// root that holds it (openat2 RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS on
// Linux, else a walk with O_NOFOLLOW at every component), missing
// parents are created one mkdirat at a time (each checked first), and
// the opened directory's real path (the descriptor's name, not the
// path) is checked with CheckWrite again, so the protected paths (.git,
// the agents' configuration) are refused there too. A final component
// that is a symlink is resolved first: the write replaces its target,
// which must itself pass the fence.
//
// A path that changes concurrently in a way that would lead elsewhere
// fails with an error wrapping ErrPathChanged, never a write outside.
// Only workspace-write writes; other modes get CheckWrite's refusal
// (danger-full-access has no fence: its caller writes by name).
func (p Policy) OpenWriteDir(path string) (*WriteDir, error) {
	if err := p.CheckWrite(path); err != nil {
		return nil, err
	}
	if p.Mode != WorkspaceWrite {
		return nil, &DeniedError{Path: path, Mode: p.Mode, Reason: "no fenced write in this mode"}
	}
	deny := func(format string, args ...any) error {
		return &DeniedError{Path: path, Mode: p.Mode, Reason: fmt.Sprintf(format, args...)}
	}
	ws, err := workspaceRoot(p)
	if err != nil {
		return nil, deny("%v", err)
	}
	target, err := resolvePath(ws, path)
	if err != nil {
		return nil, deny("cannot resolve the path: %v", err)
	}
	roots := []string{ws}
	for _, r := range p.WritableRoots {
		if rr, err := resolvePath(ws, r); err == nil {
			roots = append(roots, rr)
		}
	}
	root := ""
	for _, r := range roots {
		// The innermost root: a writable root may lie inside another.
		if within(target, r) && len(r) > len(root) {
			root = r
		}
	}
	if root == "" || target == root {
		return nil, deny("outside the workspace %s and the writable roots", ws)
	}
	parent, name := filepath.Dir(target), filepath.Base(target)
	rootf, err := os.OpenFile(root, dirFlags|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(parent, root), "/")
	dir := rootf
	if rel != "" {
		dir, err = p.openBeneath(rootf, root, rel)
		rootf.Close()
		if err != nil {
			return nil, err
		}
	}
	real, err := fdPath(dir, parent)
	if err != nil {
		dir.Close()
		return nil, err
	}
	if err := p.CheckWrite(filepath.Join(real, name)); err != nil {
		dir.Close()
		return nil, err
	}
	return &WriteDir{Dir: dir, Name: name, Path: real}, nil
}

// openBeneath opens directory rel beneath rootf (whose path is root),
// creating what is missing.
func (p Policy) openBeneath(rootf *os.File, root, rel string) (*os.File, error) {
	if f, err := openat2Beneath(rootf, rel); err == nil {
		return f, nil
	} else if !errors.Is(err, unix.ENOENT) && !errors.Is(err, errNoOpenat2) {
		return nil, fmt.Errorf("open %s beneath %s: %w", rel, root, err)
	}
	// Missing parents, or no openat2: one component at a time, never
	// following a symlink. rel came from a resolved path, so a symlink
	// here was swapped in after the resolution.
	cur, curPath := rootf, root
	own := false
	defer func() {
		if own {
			cur.Close()
		}
	}()
	for c := range strings.SplitSeq(rel, "/") {
		next := filepath.Join(curPath, c)
		if c == "" || c == "." || c == ".." {
			// rel is clean and resolved; these would step out of the walk.
			return nil, fmt.Errorf("%s: %w", next, ErrPathChanged)
		}
		fd, err := unix.Openat(int(cur.Fd()), c, dirFlags|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ENOENT) {
			// Check the directory about to be made where it will really
			// be: the descriptor's name, not the path.
			real, perr := fdPath(cur, curPath)
			if perr != nil {
				return nil, perr
			}
			if cerr := p.CheckWrite(filepath.Join(real, c)); cerr != nil {
				return nil, cerr
			}
			if merr := unix.Mkdirat(int(cur.Fd()), c, 0o755); merr != nil && !errors.Is(merr, unix.EEXIST) {
				return nil, fmt.Errorf("mkdir %s: %w", next, merr)
			}
			fd, err = unix.Openat(int(cur.Fd()), c, dirFlags|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) || errors.Is(err, unix.ENOTDIR) && isSymlinkAt(cur, c) {
			return nil, fmt.Errorf("%s: %w", next, ErrPathChanged)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", next, err)
		}
		if own {
			cur.Close()
		}
		cur, curPath, own = os.NewFile(uintptr(fd), next), next, true
	}
	own = false
	return cur, nil
}

// isSymlinkAt reports whether name in dir is a symlink (O_NOFOLLOW with
// O_DIRECTORY reports one as ENOTDIR on Linux).
func isSymlinkAt(dir *os.File, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// CheckOpenedFile is the read fence on a file a tool has opened: the
// file's real name as the kernel knows it (the descriptor's path, not
// the path the tool was given) must pass CheckRead's rules, so a symlink
// swapped in between a check of the path and the open cannot lead the
// tool to a denied file. path names the file in the error.
// danger-full-access allows everything.
func (p Policy) CheckOpenedFile(path string, f *os.File) error {
	if p.Mode == DangerFullAccess {
		return nil
	}
	real, err := openedPath(f, path)
	if err != nil {
		return &DeniedError{Path: path, Mode: p.Mode, Reason: "cannot tell which file was opened: " + err.Error()}
	}
	return p.CheckOpenedRead(path, real)
}

// OpenedReads is CheckOpenedFile for the many files one call opens (a
// grep's walk): the policy's deny-read list and readable roots are
// resolved once instead of for every file. Its verdicts are
// CheckOpenedFile's (TestOpenedReadsAgree).
type OpenedReads struct {
	p     Policy
	deny  []string
	roots []string
}

// OpenedReads returns the policy's read fence for opened files with its
// lists resolved now.
func (p Policy) OpenedReads() *OpenedReads {
	r := &OpenedReads{p: p}
	if p.Mode == DangerFullAccess {
		return r
	}
	r.deny = resolvedAll(p.DenyRead)
	if p.ConfineReads {
		r.roots = p.readRoots()
	}
	return r
}

// Check is CheckOpenedFile with the lists resolved when r was made.
func (r *OpenedReads) Check(path string, f *os.File) error {
	if r.p.Mode == DangerFullAccess {
		return nil
	}
	real, err := openedPath(f, path)
	if err != nil {
		return &DeniedError{Path: path, Mode: r.p.Mode, Reason: "cannot tell which file was opened: " + err.Error()}
	}
	target := filepath.Clean(real)
	for _, d := range r.deny {
		if within(target, d) {
			return &DeniedError{Path: path, Mode: r.p.Mode, Reason: "reading " + d + " is denied by the sandbox's deny-read list"}
		}
	}
	if r.p.ConfineReads && withinAny(target, r.roots) == "" {
		return &DeniedError{Path: path, Mode: r.p.Mode, Reason: "reads are confined to the workspace and the system directories"}
	}
	return nil
}
