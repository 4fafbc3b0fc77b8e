package sandbox

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// DefaultDenyRead is the deny-read list of a user whose home is home and
// whose dsh state lives in dshHome: the places where credentials live.
// Entries that do not exist are kept (they may be created later) and
// every backend skips what is missing when it confines.
func DefaultDenyRead(home, dshHome string) []string {
	var out []string
	if dshHome != "" {
		out = append(out, dshHome)
	}
	if home != "" {
		for _, rel := range []string{
			".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube",
			".docker/config.json", ".netrc", ".config/gh", ".git-credentials",
			".password-store", ".local/share/keyrings",
			// Browser profiles: cookies and saved passwords.
			".mozilla", ".config/google-chrome", ".config/chromium",
			".config/BraveSoftware", ".config/microsoft-edge",
			"snap/firefox", "snap/chromium",
		} {
			out = append(out, filepath.Join(home, rel))
		}
	}
	return out
}

// SystemSecrets are the host's secrets that only root can read: the
// password hashes and the SSH host keys (with them a command could
// impersonate this machine). DefaultDenyRead leaves them out, since no
// other user can read them anyway and each entry costs Landlock a carve
// of /etc; add them when commands run as root.
func SystemSecrets() []string {
	out := []string{"/etc/shadow", "/etc/gshadow"}
	keys, _ := filepath.Glob("/etc/ssh/ssh_host_*_key")
	return append(out, keys...)
}

// SystemReadRoots are the directories a read-confined command may read
// besides its workspace: what programs need to run (binaries, libraries,
// configuration without secrets, devices, the command's own /proc).
func SystemReadRoots() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/dev", "/proc", "/sys"}
}

// CheckRead is the in-process read fence for file tools (read, grep,
// glob, view): it refuses a path that lies in DenyRead or, under
// ConfineReads, outside the readable roots, after resolving every
// symlink of its longest existing prefix. It is a check on the path;
// the file tools must check the file they actually opened again (the
// resolved name of the open descriptor) so that a symlink swapped in
// between cannot lead them elsewhere. danger-full-access allows
// everything.
func (p Policy) CheckRead(path string) error {
	if p.Mode == DangerFullAccess {
		return nil
	}
	base := p.Workspace
	if base == "" || !filepath.IsAbs(base) {
		base = "/"
	}
	target, err := resolvePath(base, path)
	if err != nil {
		return &DeniedError{Path: path, Mode: p.Mode, Reason: "cannot resolve the path: " + err.Error()}
	}
	return p.checkResolvedRead(path, target)
}

// CheckOpenedRead is CheckRead for a path already resolved by the kernel
// (the name of an open descriptor, /proc/self/fd/N): no symlink is
// followed again.
func (p Policy) CheckOpenedRead(path, resolved string) error {
	if p.Mode == DangerFullAccess {
		return nil
	}
	return p.checkResolvedRead(path, filepath.Clean(resolved))
}

func (p Policy) checkResolvedRead(path, target string) error {
	deny := func(reason string) error {
		return &DeniedError{Path: path, Mode: p.Mode, Reason: reason}
	}
	// The most specific entry wins, as under the backends
	// (readlayout.go): a workspace inside a denied directory stays
	// readable, a denied directory inside the workspace does not.
	if d := p.readDeniedBy(target); d != "" {
		return deny("reading " + d + " is denied by the sandbox's deny-read list")
	}
	if p.ConfineReads {
		if withinAny(target, p.readRoots()) == "" {
			return deny("reads are confined to the workspace and the system directories")
		}
	}
	return nil
}

// readDeniedBy returns the DenyRead entry that denies the resolved path
// target, or "" (the most specific of the deny entries and the readable
// roots decides).
func (p Policy) readDeniedBy(target string) string {
	denied := resolvedAll(p.DenyRead)
	kept := resolvedAll(p.readable())
	if !deniedBy(target, denied, kept) {
		return ""
	}
	d := ""
	for _, e := range denied {
		if within(target, e) && len(e) > len(d) {
			d = e
		}
	}
	return d
}

// ReadDenialIn returns the DenyRead entry that a refused command's
// output names (a tool prints the path it could not open), or "": the
// result can then say that a read was refused, and why, instead of
// suggesting a write escalation.
func (p Policy) ReadDenialIn(output []byte) string {
	if p.Mode == DangerFullAccess {
		return ""
	}
	best := ""
	for _, d := range p.DenyRead {
		if d != "" && len(d) > len(best) && bytes.Contains(output, []byte(d)) {
			best = d
		}
	}
	return best
}

// readRoots are the roots a read-confined policy may read, resolved.
func (p Policy) readRoots() []string {
	roots := slices.Concat(p.readable(), SystemReadRoots())
	return resolvedAll(roots)
}

// readable are the roots that stay readable beneath a deny entry and
// under ConfineReads: the workspace with its git dirs (a linked
// worktree's), the writable roots and ReadRoots.
func (p Policy) readable() []string {
	out := slices.Concat([]string{p.Workspace}, p.WritableRoots, p.ReadRoots)
	if p.Workspace != "" && filepath.IsAbs(p.Workspace) {
		if ws, err := resolvePath("/", p.Workspace); err == nil {
			out = append(out, gitPaths(ws)...)
		}
	}
	return out
}

// resolvedAll resolves each absolute path through its symlinks, keeping
// the lexical path too when it differs (a denial must hold for both
// names); relative and unresolvable entries are dropped.
func resolvedAll(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, d := range paths {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		c := filepath.Clean(d)
		out = append(out, c)
		if r, err := resolvePath("/", c); err == nil && r != c {
			out = append(out, r)
		}
	}
	return out
}

// configPaths are the repository's agent and hook configuration under
// root that stay read-only in workspace-write, as .git does: a command
// or a file tool that rewrote them would change what runs unconfined
// (trusted hooks) or what the next session is told. Only existing
// entries are returned; a missing one is protected by CheckWrite's name
// check (configDirNames) but cannot be bound read-only by a backend.
func configPaths(root string) []string {
	var out []string
	for _, n := range configDirNames {
		p := filepath.Join(root, n)
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// configProtected is configPaths(root) for a layout: each existing
// entry and, for a symlink (which a bind mount or a Landlock grant
// cannot carve out by itself), its target.
func configProtected(root string) []string {
	var out []string
	for _, c := range configPaths(root) {
		out = append(out, c)
		if fi, err := os.Lstat(c); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if t, err := resolvePath("/", c); err == nil {
				if _, err := os.Stat(t); err == nil {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// policyProtected are p.Protected that exist, relative ones taken
// against the workspace ws: each as named and resolved.
func policyProtected(p Policy, ws string) []string {
	var out []string
	for _, name := range protectedNames(p, ws) {
		if _, err := os.Lstat(name); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// protectedNames are the paths that writes must not reach beyond the
// git metadata, whether they exist or not: each root's configuration
// directories (configDirNames) and p.Protected, each as named and
// resolved through its existing symlinks.
func protectedNames(p Policy, roots ...string) []string {
	var names []string
	for _, r := range roots {
		for _, n := range configDirNames {
			names = append(names, filepath.Join(r, n))
		}
	}
	base := "/"
	if len(roots) > 0 {
		base = roots[0]
	}
	for _, pr := range p.Protected {
		if pr == "" {
			continue
		}
		if !filepath.IsAbs(pr) {
			pr = filepath.Join(base, pr)
		}
		names = append(names, filepath.Clean(pr))
	}
	out := resolvedAll(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// configDirNames are the per-repository configuration directories of dsh
// and of the agents whose configuration dsh reads.
var configDirNames = []string{".dsh", ".claude", ".codex"}
