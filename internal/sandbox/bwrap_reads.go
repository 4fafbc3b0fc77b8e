package sandbox

import (
	"os"
	"slices"
	"strings"
)

// Deny-read and read confinement under bubblewrap (readlayout.go says
// what is denied and what stays readable).
//
// A denied directory is covered by an empty tmpfs, read-only and mode
// 0000 (0111 when a kept root lies beneath it and must stay reachable):
// `ls ~/.ssh` and `cat ~/.ssh/id_rsa` fail with "Permission denied". A
// denied file (or socket, fifo) is covered by the host's /dev/null bound
// read-only: bubblewrap binds with nodev, and the kernel refuses to open
// a device node on a nodev mount with EACCES whatever the caller's
// capabilities, so `cat ~/.netrc` fails with "Permission denied" rather
// than reading an empty file, root included. A command run as root
// would still list the empty mode-0000 directory (CAP_DAC_OVERRIDE
// ignores mode bits), so under a denied directory root's commands lose
// CAP_DAC_OVERRIDE as well (readCapArgs): mode bits then bind root as
// they bind any user, which also keeps other users' private files out
// of its reach.
//
// Under ConfineReads the host root is not bound at all: bubblewrap's
// empty root (read-only) holds only the system roots, the workspace,
// the writable roots, ReadRoots and the helper binary.

// readCapArgs drops CAP_DAC_OVERRIDE for root when a directory is denied
// (see above).
func readCapArgs(r readLayout) []string {
	if os.Geteuid() == 0 && r.denyDirs() {
		return []string{"--cap-drop", "CAP_DAC_OVERRIDE"}
	}
	return nil
}

// rootArgs are the root, /dev and /proc: the host root read-only, or
// under ConfineReads the system roots only (a symlink such as /bin ->
// usr/bin made again as a symlink).
func rootArgs(r readLayout) []string {
	tail := []string{"--dev", "/dev", "--proc", "/proc"}
	if !r.confined {
		return append([]string{"--ro-bind", "/", "/"}, tail...)
	}
	var args []string
	for _, s := range r.readRoots {
		if s == "/dev" || s == "/proc" || !slices.Contains(SystemReadRoots(), s) {
			continue
		}
		fi, err := os.Lstat(s)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(s); err == nil {
				args = append(args, "--symlink", t, s)
			}
			continue
		}
		args = append(args, "--ro-bind", s, s)
	}
	return append(args, tail...)
}

// orderedMounts are the writable binds, the deny-read mounts, the kept
// roots bound again beneath them and, under ConfineReads, the readable
// roots beyond the system ones, parents before children: a later mount
// hides what an earlier one put beneath it, so the deepest entry wins.
func orderedMounts(r readLayout, writable []string) []string {
	type mount struct {
		path string
		args []string
	}
	var ms []mount
	bound := map[string]bool{}
	bind := func(d string) {
		if bound[d] {
			return
		}
		bound[d] = true
		if withinAny(d, writable) != "" {
			ms = append(ms, mount{d, []string{"--bind", d, d}})
		} else {
			ms = append(ms, mount{d, []string{"--ro-bind", d, d}})
		}
	}
	for _, d := range writable {
		bind(d)
	}
	for _, d := range r.deny {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			ms = append(ms, mount{d, []string{"--tmpfs", d}})
		} else {
			ms = append(ms, mount{d, []string{"--ro-bind", "/dev/null", d}})
		}
	}
	for _, k := range r.keep {
		bind(k)
	}
	if r.confined {
		for _, k := range r.readRoots {
			if slices.Contains(SystemReadRoots(), k) || withinAny(k, writable) != "" {
				continue
			}
			bind(k)
		}
		if r.self != "" && withinAny(r.self, r.readRoots) == "" {
			bind(r.self)
		}
	}
	// Parents first; a mount and its parent's never compare equal
	// after the dedup above, so the order is total.
	slices.SortStableFunc(ms, func(a, b mount) int { return strings.Compare(a.path, b.path) })
	var args []string
	for _, m := range ms {
		args = append(args, m.args...)
	}
	return args
}

// readFinalArgs close the deny-read directories (mode and read-only,
// once everything beneath them is mounted) and, under ConfineReads, the
// root.
func readFinalArgs(r readLayout) []string {
	var args []string
	for _, d := range r.deny {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		mode := "0000"
		if r.keepsInside(d) {
			mode = "0111"
		}
		args = append(args, "--chmod", mode, d, "--remount-ro", d)
	}
	if r.confined {
		args = append(args, "--remount-ro", "/")
	}
	return args
}
