//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr is how the spawner starts the helper for mode: in a new PID
// and mount namespace when it holds CAP_SYS_ADMIN. For a user namespace
// it starts the helper plainly, and the helper creates the namespace
// (startInner), since dsh, non-dumpable, cannot write a child's uid_map.
func (m nsMode) procAttr() func(*syscall.SysProcAttr) {
	if m == nsPID {
		return func(a *syscall.SysProcAttr) {
			a.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
		}
	}
	return nil
}

// userNamespace makes a spawn create a user, PID and mount namespace
// that maps only the caller's own uid and gid.
func userNamespace(a *syscall.SysProcAttr) {
	uid, gid := os.Getuid(), os.Getgid()
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
	// Kept across the exec of the inner helper, which is not root in the
	// namespace unless the caller is: it needs CAP_SYS_ADMIN there to
	// mount /proc. The command gets none: dropCaps clears the ambient
	// set, and so does a lifetime-only helper before its command.
	a.AmbientCaps = append(a.AmbientCaps, unix.CAP_SYS_ADMIN)
}

// nsCandidates are the namespace modes worth trying here, best first.
func nsCandidates() []nsMode {
	var out []nsMode
	if hasCap(unix.CAP_SYS_ADMIN) {
		out = append(out, nsPID)
	}
	return append(out, nsUser)
}

// hasCap reports whether this thread holds c in its effective set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}

// probeNS reports whether the helper at self starts a command in mode m
// here: the spawn may be refused (no privilege, user namespaces off) and
// the helper fails closed when it cannot mount /proc in the namespace
// (a container that masks parts of /proc).
func probeNS(self string, m nsMode) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	argv := helperArgv(self, helperSpec{Lifetime: true, NS: string(m), Parent: os.Getpid()}, []string{self, nsProbeArg})
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = probeEnv()
	cmd.SysProcAttr = spawnAttr(m.procAttr())
	return cmd.Run()
}

// runNSProbe is the namespace probe's command: a child of the helper,
// which is pid 1, with a /proc of the namespace (in the host's /proc,
// self would be the host pid).
func runNSProbe() int {
	if self, err := os.Readlink("/proc/self"); os.Getppid() != 1 || err != nil || self != strconv.Itoa(os.Getpid()) {
		return 1
	}
	return 0
}

// spawnAttr is how this package starts the helper itself (probes): in
// its own session, killed with its parent, adjusted by procAttr.
func spawnAttr(procAttr func(*syscall.SysProcAttr)) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if procAttr != nil {
		procAttr(a)
	}
	return a
}
