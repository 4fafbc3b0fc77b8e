package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
)

// The UNIX socket gate keeps confined commands away from the pathname
// UNIX sockets of host daemons (/var/run/docker.sock is root on the host,
// an ssh-agent signs as the user). Neither backend stops connect(2) by
// itself: a read-only bind or a Landlock ABI < 9 ruleset does not cover
// it. The helper therefore stacks a seccomp filter that hands connect,
// sendto with an address, sendmsg and sendmmsg to a supervisor in the
// helper process (unixgate_linux.go), which performs each call itself
// after checking where a pathname address leads.
//
// Where it leads is checked by inode, not by name alone: a socket under
// a root must lie beneath the root's own directory (RootIDs). And no
// host socket can be brought there: TMPDIR is the session's own and,
// like the workspace and the writable roots, a mount of its own under
// bubblewrap (link and rename fail with EXDEV across mounts), while
// Landlock lets files be moved or linked between directories (REFER)
// only within TMPDIR and the roots, never out of the shared temp dirs.

// SocketDeniedPrefix starts the line the helper prints on the command's
// stderr when the gate refuses a UNIX socket, followed by the socket's
// path. Denial detection and the bash tool's marker recognise it.
const SocketDeniedPrefix = "dsh-sandbox: socket refused: "

// gateSpec is what the gate lets a command reach: pathname UNIX sockets
// inside Roots (the workspace, writable roots and temp dirs) and the
// Sockets a profile allows (a socket, or a directory of sockets). All
// paths are canonical (no symlinks), as the supervisor compares them with
// the canonical path of the socket a call names.
type gateSpec struct {
	Roots []string `json:"roots,omitempty"`
	// RootIDs are the roots' directories as they were when the spec was
	// made: a socket under a root is reachable only while it lies
	// beneath that very directory (reached from it again, inode checked).
	// A host directory renamed to a root's name within the same parent
	// (no move across directories needed, so Landlock's REFER does not
	// stop it), or a mount over a root in a namespace of the command's
	// own, is not the root. A root without an ID is not checked.
	RootIDs map[string]fileID `json:"rootids,omitempty"`
	Sockets []string          `json:"sockets,omitempty"`
}

// fileID names a file for as long as it exists: its device and inode.
type fileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// allows reports whether the socket at canonical path p may be reached
// by its path, and through which root ("" for an allowed socket, which
// is the host's by design and checked by path alone).
func (g gateSpec) allows(p string) (root string, ok bool) {
	if r := withinAny(p, g.Roots); r != "" {
		return r, true
	}
	return "", withinAny(p, g.Sockets) != ""
}

// newGateSpec builds the gate's allow-list for a resolved layout and the
// policy's allowed sockets: sockets in the workspace, the writable roots
// (workspace-write) and the private TMPDIR are reachable. The shared temp
// dirs are not, although workspace-write may write there: host daemons
// keep their sockets in them (tmux, X11, ssh-agent). Allowed sockets must
// be absolute (Policy.validate); they are resolved so that a listed
// symlink allows its target.
func newGateSpec(l layout, p Policy) (gateSpec, error) {
	var g gateSpec
	for _, d := range []string{l.scratch, l.tmpdir} {
		if d != "" {
			g.Roots = append(g.Roots, d)
		}
	}
	if p.Workspace != "" && filepath.IsAbs(p.Workspace) {
		if ws, err := resolvePath("/", p.Workspace); err == nil {
			g.Roots = append(g.Roots, ws)
			if p.Mode == WorkspaceWrite {
				for _, r := range p.WritableRoots {
					if rr, err := resolvePath(ws, r); err == nil {
						g.Roots = append(g.Roots, rr)
					}
				}
			}
		}
	}
	for _, s := range p.UnixSockets {
		r, err := resolvePath("/", s)
		if err != nil {
			return gateSpec{}, fmt.Errorf("sandbox: allowed socket %s: %w", s, err)
		}
		g.Sockets = append(g.Sockets, r)
	}
	slices.Sort(g.Roots)
	g.Roots = slices.Compact(g.Roots)
	for _, r := range g.Roots {
		if id, ok := fileIDOf(r); ok {
			if p.pin != nil {
				// A root replaced since the session first saw it (a host
				// directory renamed to its name by an earlier command)
				// is not the root.
				id = p.pin(r, id)
			}
			if g.RootIDs == nil {
				g.RootIDs = map[string]fileID{}
			}
			g.RootIDs[r] = id
		}
	}
	slices.Sort(g.Sockets)
	g.Sockets = slices.Compact(g.Sockets)
	return g, nil
}

// ValidateUnixSockets checks a profile's list of allowed socket paths:
// each must be a clean absolute path (the gate compares canonical paths,
// and a relative one would depend on each command's cwd).
func ValidateUnixSockets(paths []string) error {
	for _, s := range paths {
		if s == "" || !filepath.IsAbs(s) {
			return fmt.Errorf("allowed UNIX socket %q is not an absolute path", s)
		}
		if filepath.Clean(s) != s {
			return fmt.Errorf("allowed UNIX socket %q is not a clean path (want %q)", s, filepath.Clean(s))
		}
	}
	return nil
}
