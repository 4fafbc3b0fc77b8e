package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// readLayout is what a policy lets a command read, resolved against the
// live filesystem: both backends build their read confinement from it.
//
// The rule, for both backends and CheckRead: the most specific entry
// wins. A path is unreadable when the deepest of the deny entries and
// the kept roots holding it is a deny entry, so ~/.ssh stays denied in a
// workspace that is $HOME, and a workspace inside $DSH_HOME (a review's
// worktree) stays readable although $DSH_HOME is denied.
type readLayout struct {
	// deny are the DenyRead entries that exist, resolved (a symlink's
	// target, never the link), none of them inside another and none
	// equal to a kept root.
	deny []string
	// keep are the roots a command must be able to read (the workspace,
	// the writable roots, the temp dirs and TMPDIR, ReadRoots, the
	// helper binary) that lie strictly inside a deny entry: they are
	// bound or granted again beneath it.
	keep []string
	// confined is ConfineReads: nothing is readable but readRoots (and
	// the writable areas).
	confined bool
	// readRoots, when confined, are the system roots that exist (as
	// named: a symlink such as /bin stays one) followed by the
	// workspace, the writable roots and ReadRoots that exist, resolved.
	readRoots []string
	// self is the helper binary, resolved: bubblewrap must keep it
	// visible under ConfineReads and beneath a deny entry.
	self string
}

// newReadLayout resolves p's read rules. writable are the layout's
// writable areas (roots, temps, scratch), already resolved.
func newReadLayout(p Policy, writable []string) readLayout {
	var r readLayout
	var kept []string
	add := func(path string) {
		if path == "" || !filepath.IsAbs(path) {
			return
		}
		rp, err := resolvePath("/", path)
		if err != nil {
			return
		}
		if _, err := os.Stat(rp); err == nil && !slices.Contains(kept, rp) {
			kept = append(kept, rp)
		}
	}
	add(p.Workspace)
	if p.Workspace != "" && filepath.IsAbs(p.Workspace) {
		// A linked worktree's git dir and the common dir it shares with
		// its main checkout (a review's worktree of a clone elsewhere):
		// git cannot work in the workspace without them.
		if ws, err := resolvePath("/", p.Workspace); err == nil {
			for _, g := range gitPaths(ws) {
				add(g)
			}
		}
	}
	for _, w := range writable {
		add(w)
	}
	for _, d := range p.ReadRoots {
		add(d)
	}
	if r.confined = p.ConfineReads; r.confined {
		for _, s := range SystemReadRoots() {
			if _, err := os.Lstat(s); err == nil {
				r.readRoots = append(r.readRoots, s)
			}
		}
		r.readRoots = append(r.readRoots, kept...)
	}
	// The helper binary runs inside bubblewrap (the socket gate, the
	// session server): it must stay readable wherever it lies.
	if self, err := selfExecutable(); err == nil {
		if rs, err := resolvePath("/", self); err == nil {
			r.self = rs
			add(rs)
		}
	}

	var deny []string
	for _, d := range resolvedAll(p.DenyRead) {
		fi, err := os.Lstat(d)
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			// Missing: nothing to read (and nothing to bind or grant).
			// A symlink: its target is in the list too (resolvedAll),
			// and mounts and grants follow links anyway.
			continue
		}
		if slices.Contains(kept, d) {
			continue // the session was pointed there: it wins
		}
		if r.confined && withinAny(d, r.readRoots) == "" {
			continue // outside every read root: unreadable anyway
		}
		deny = append(deny, d)
	}
	slices.Sort(deny)
	deny = slices.Compact(deny)
	for _, d := range deny {
		if len(r.deny) > 0 && within(d, r.deny[len(r.deny)-1]) {
			continue
		}
		r.deny = append(r.deny, d)
	}
	for _, k := range kept {
		for _, d := range r.deny {
			if k != d && within(k, d) {
				r.keep = append(r.keep, k)
				break
			}
		}
	}
	return r
}

// denied reports whether path (resolved) is unreadable by the deny list:
// the deepest deny entry or kept root holding it is a deny entry.
func (r readLayout) denied(path string) bool {
	return deniedBy(path, r.deny, r.keep)
}

// deniedBy is the most-specific-entry rule over a deny list and kept
// roots.
func deniedBy(path string, deny, keep []string) bool {
	best, isDeny := "", false
	for _, d := range deny {
		if within(path, d) && len(d) > len(best) {
			best, isDeny = d, true
		}
	}
	for _, k := range keep {
		if within(path, k) && len(k) >= len(best) {
			best, isDeny = k, false
		}
	}
	return isDeny
}

// denyDirs reports whether a deny entry is a directory.
func (r readLayout) denyDirs() bool {
	for _, d := range r.deny {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// keepsInside reports whether a kept root lies beneath deny entry d.
func (r readLayout) keepsInside(d string) bool {
	for _, k := range r.keep {
		if k != d && within(k, d) {
			return true
		}
	}
	return false
}
