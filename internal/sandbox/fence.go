package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrDenied matches (with errors.Is) every *DeniedError.
var ErrDenied = errors.New("sandbox: file access denied")

// DeniedError is the in-process fence's refusal of a write. Its message
// starts with "sandbox: file access denied", the marker tool results use
// for sandbox denials, so the model can tell a denial from a failure and
// ask to escalate.
type DeniedError struct {
	// Path is the path as the tool was given it.
	Path string
	// Mode is the sandbox mode that refused it.
	Mode Mode
	// Reason says why, naming the resolved path when a symlink or ".."
	// moved it.
	Reason string
}

// Error implements error.
func (e *DeniedError) Error() string {
	return fmt.Sprintf("sandbox: file access denied: %s (%s: %s)", e.Path, e.Mode, e.Reason)
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// CheckWrite is the in-process fence for file tools (write, edit, …): it
// reports whether a write to path is allowed under p, with the same rules
// the OS backends enforce for commands, so a file tool is no second write
// path around the sandbox.
//
// A relative path is taken relative to Workspace. The path is resolved
// through the symlinks of its longest existing prefix, so a symlink inside
// the workspace that points outside is caught. Writes are allowed only
// inside Workspace or a WritableRoot, never into a root's .git metadata
// or agent configuration (.dsh, .claude, .codex: configDirNames, whether
// they exist or not) or a Policy.Protected path or a DenyRead entry,
// never in read-only;
// danger-full-access allows everything. Unlike
// commands, file tools get no temp dirs: add them to WritableRoots if
// they need them.
//
// A regular file with more than one hard link is refused too: its other
// names may lie outside the fence (a link planted in the workspace to a
// file outside it), and they cannot be found cheaply. The check is on
// the path, before the tool runs; a link planted after it cannot change
// the outside file either, because the file tools write through a
// temporary file and a rename (fs.WriteFileAtomic), which gives the name
// a new inode instead of writing into the old one.
//
// Limit: commands are not covered by this check. Landlock and
// bubblewrap grant access by path, not by inode, so a bash command in
// workspace-write can still write into an outside file through a hard
// link planted inside the workspace (hard links to files the process may
// not write are refused by the kernel only with fs.protected_hardlinks,
// which stops planting links to files of other users, not to the user's
// own files).
func (p Policy) CheckWrite(path string) error {
	deny := func(format string, args ...any) error {
		return &DeniedError{Path: path, Mode: p.Mode, Reason: fmt.Sprintf(format, args...)}
	}
	switch p.Mode {
	case DangerFullAccess:
		return nil
	case ReadOnly:
		return deny("the read-only sandbox allows no writes")
	case WorkspaceWrite:
	default:
		return deny("unknown sandbox mode")
	}
	ws, err := workspaceRoot(p)
	if err != nil {
		return deny("%v", err)
	}
	target, err := resolvePath(ws, path)
	if err != nil {
		return deny("cannot resolve the path: %v", err)
	}
	moved, lexical := "", path
	if !filepath.IsAbs(path) {
		lexical = filepath.Join(ws, path)
	}
	if filepath.Clean(lexical) != target {
		moved = " (it resolves to " + target + ")"
	}
	roots := []string{ws}
	for _, r := range p.WritableRoots {
		if rr, err := resolvePath(ws, r); err == nil {
			roots = append(roots, rr)
		}
	}
	if withinAny(target, roots) == "" {
		return deny("outside the workspace %s and the writable roots%s", ws, moved)
	}
	for _, r := range roots {
		for _, g := range gitPaths(r) {
			if within(target, g) {
				return deny("git metadata %s stays read-only%s", g, moved)
			}
		}
	}
	// The repository's agent and hook configuration, and what trusted
	// hooks run, by name: a file the tool would create in a missing
	// .dsh is refused as well.
	for _, g := range protectedNames(p, roots...) {
		if within(target, g) {
			return deny("%s is protected configuration (agent and hook configuration, or a file trusted hooks run) and stays read-only%s", g, moved)
		}
	}
	// What may not be read may not be written either (a session started
	// in $HOME must not plant ~/.ssh/authorized_keys), as under the
	// backends.
	if d := p.readDeniedBy(target); d != "" {
		return deny("%s is on the sandbox's deny-read list and stays out of reach%s", d, moved)
	}
	// The other names of a hard-linked file cannot be found short of
	// walking every filesystem, so none of them can be proven inside the
	// fence: a planted link to an outside file is refused like the file.
	if fi, err := os.Lstat(target); err == nil && fi.Mode().IsRegular() {
		if n := hardLinks(fi); n > 1 {
			return deny("the file has %d hard links%s, and the fence cannot tell where its other names are, so it may be a file outside the workspace; "+
				"if this name should have its own copy, break the link with bash (cp -p %s %s.copy && mv %s.copy %s), then edit it",
				n, moved, target, target, target, target)
		}
	}
	return nil
}
