package sandbox

import (
	"fmt"
	"slices"
)

// landlockReads adds a layout's read rules to the helper's spec
// (readlayout.go). Landlock is an allow-list and its rights are
// inherited down a hierarchy, so a deny-read entry is carved out of
// every grant that holds it, as the git metadata is out of the writable
// roots: each directory on the way to it gets no right itself and its
// other entries are granted one by one. The price: those directories
// ("/", $HOME, ~/.config…) cannot be listed, and entries created in them
// after the command started cannot be read by it; every other file in
// them can.
//
// A deny entry inside a temp dir, which Landlock grants whole (carving
// it would break mktemp), stays readable: reported as a gap.
func landlockReads(spec helperSpec, lay layout, gaps []string) (helperSpec, []string) {
	r := lay.reads
	spec.Deny = slices.Clone(r.deny)
	if r.confined {
		spec.Confine = true
		for _, root := range r.readRoots {
			rr, err := resolvePath("/", root)
			if err == nil && !slices.Contains(spec.Read, rr) {
				spec.Read = append(spec.Read, rr)
			}
		}
	} else if len(r.keep) > 0 {
		spec.Read = append([]string{"/"}, r.keep...)
	}
	for _, d := range r.deny {
		if w := withinAny(d, spec.Whole); w != "" && !r.denied(w) {
			gaps = append(gaps, fmt.Sprintf("%s lies inside temp dir %s, which Landlock grants whole: it stays readable", d, w))
		}
	}
	return spec, gaps
}
