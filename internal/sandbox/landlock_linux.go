//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Landlock syscalls are made directly: go-landlock v0.11.2 pulls in
// libcap's psx, which this module's go.sum lacks, and the helper needs
// only a few calls on one thread right before exec anyway.

// Filesystem access rights, grouped as the helper grants them.
const (
	llRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR
	llWriteV1 = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	// llFile are the rights the kernel accepts on a rule for a non-directory.
	llFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// llDevice is what /dev/null, /dev/tty and the ptys need: `>
	// /dev/null` opens with O_TRUNC.
	llDevice = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE
)

// handledFS is every right the helper restricts at a given ABI. Device
// ioctls (ABI 5) and pathname UNIX socket connects (ABI 9) are left
// alone: they are not writes, and terminals and local daemons need them.
func handledFS(abi int) uint64 {
	h := uint64(llRead | llWriteV1)
	if abi >= 2 {
		// Handled and then granted inside writable trees, so `mv a/x b/`
		// works there; before ABI 2 reparenting is always refused.
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return h
}

var abiOnce = sync.OnceValue(func() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
})

// landlockABI is the kernel's Landlock ABI version, 0 when Landlock is
// missing or disabled.
func landlockABI() int { return abiOnce() }

// devices are granted llDevice when they exist.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// restrictSelf applies Landlock, no_new_privs and seccomp to the calling
// thread, and drops the capabilities that reach past them.
func restrictSelf(spec helperSpec) error {
	if err := dropCaps(); err != nil {
		return err
	}
	abi := landlockABI()
	if abi < 1 {
		return errors.New("Landlock is not enabled in this kernel")
	}
	handled := handledFS(abi)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	sc := seccompSupported()
	if !spec.Network && !sc && abi >= 4 {
		// Without seccomp, Landlock's TCP rules are the best left: no
		// port is granted, so TCP connect and bind fail.
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL
		if !spec.Network {
			attr.Scoped |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	}
	// The kernel takes a prefix of the struct; the fields after Scoped
	// (ABI 10 quieting) are zero and left out.
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Offsetof(attr.Quiet_access_fs), 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	rs := int(fd)
	defer unix.Close(rs)

	// Reads: everywhere, or the confined roots, except the deny-read
	// entries (carved like the git metadata below).
	reads := spec.Read
	if len(reads) == 0 && !spec.Confine {
		reads = []string{"/"}
	}
	for _, r := range reads {
		if err := grantCarvedAccess(rs, r, spec.Deny, llRead, handled); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// System paths may be symlinks (/dev/ptmx -> pts/ptmx in containers,
	// /dev/shm -> /run/shm): they are resolved first, and one that cannot
	// be granted is skipped, which only makes the sandbox stricter.
	system := func(path string, access uint64) {
		if r, err := resolvePath("/", path); err == nil {
			_ = addRule(rs, r, access, handled)
		}
	}
	for _, d := range devices {
		system(d, llDevice)
	}
	// Moving or linking a file between directories (REFER) is granted
	// only in TMPDIR and the roots, not in the shared temp dirs: a host
	// socket there (ssh-agent, tmux, X11) could otherwise be linked or
	// moved into TMPDIR or the workspace, where the socket gate lets
	// commands connect. Such a move fails with EXDEV (mv copies instead),
	// as it does between bubblewrap's mounts.
	shared := handled &^ unix.LANDLOCK_ACCESS_FS_REFER
	if spec.Shm {
		system("/dev/shm", shared)
	}
	for _, d := range spec.Whole {
		access := shared
		if d == spec.TmpDir {
			access = handled
		}
		if err := addRule(rs, d, access, handled); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if spec.TmpDir != "" && !slices.Contains(spec.Whole, spec.TmpDir) {
		if err := addRule(rs, spec.TmpDir, handled, handled); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	for _, r := range spec.Roots {
		if err := grantCarved(rs, r, slices.Concat(spec.Protected, spec.Deny), handled); err != nil {
			return err
		}
	}

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	if sc {
		// The TIOCSTI filter applies in every mode; sockets only without
		// network.
		if err := loadSeccomp(!spec.Network); err != nil {
			return err
		}
	}
	return nil
}

// scopeSelf puts the calling thread in a Landlock domain that restricts
// no file access but keeps the thread, and what it forks, from
// signalling processes outside the domain (ABI 6) and from tracing them
// (any domain): bubblewrap's commands, whose sandbox server (or gate
// helper) and bubblewrap's init share their PID namespace, cannot stop
// or trace them. Before ABI 6 it does nothing: the server is
// non-dumpable, so it cannot be traced, and one that a command stops is
// killed with the command at its timeout.
func scopeSelf() error {
	if landlockABI() < 6 {
		return nil
	}
	attr := unix.LandlockRulesetAttr{Scoped: unix.LANDLOCK_SCOPE_SIGNAL}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Offsetof(attr.Quiet_access_fs), 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// grantCarved grants root writable except for the protected paths
// beneath it. Landlock rights are inherited down a hierarchy and cannot
// be subtracted, so on the way to a protected path each directory gets
// nothing itself and its other entries get their grants one by one.
// Symlinks are never granted: a grant follows them, so a link to /etc in
// the workspace would make /etc writable.
func grantCarved(rs int, root string, protected []string, handled uint64) error {
	return grantCarvedAccess(rs, root, protected, handled, handled)
}

// grantCarvedAccess is grantCarved granting access instead of every
// handled right: the read grants carve the deny-read entries out the
// same way.
func grantCarvedAccess(rs int, root string, protected []string, access, handled uint64) error {
	var inside []string
	for _, p := range protected {
		if within(p, root) {
			inside = append(inside, p)
		}
	}
	if len(inside) == 0 {
		err := addRule(rs, root, access, handled)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return err
	}
	for _, p := range inside {
		if p == root {
			return nil // the root itself is git metadata: nothing to grant
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("carve %s: %w", root, err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		if err := grantCarvedAccess(rs, filepath.Join(root, e.Name()), inside, access, handled); err != nil {
			return err
		}
	}
	return nil
}

// addRule grants access beneath path. The path is opened without
// following any symlink (all paths here were resolved by Confine), so a
// component swapped for a link since then fails instead of redirecting
// the grant. Rights that make no sense on a non-directory are dropped
// for one.
func addRule(rs int, path string, access, handled uint64) error {
	fd, err := openNoSymlinks(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return nil // only the O_NOFOLLOW fallback gets here
	default:
		access &= llFile
	}
	access &= handled
	if access == 0 {
		return nil
	}
	pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", path, e)
	}
	return nil
}

// openNoSymlinks opens path as O_PATH refusing symlinks in every
// component (openat2, Linux 5.6, older than Landlock), or only in the
// last one where openat2 is filtered out (old container profiles).
func openNoSymlinks(path string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		fd, err = unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	return fd, err
}
