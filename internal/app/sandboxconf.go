package app

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

// sandboxDef is the `sandbox:` block of the permissions row: what
// confined commands and the file tools may read, and what stays
// read-only, in read-only and workspace-write (danger-full-access is
// unconfined by design).
//
//	sandbox:
//	  deny_read: [~/secrets]   # added to the default deny-read list
//	  allow_read: [~/.kube]    # removed from it (or an exception inside an entry)
//	  confine_reads: true      # only the workspace, writable and read roots, system dirs
//	  read_roots: [/srv/data]  # readable under confine_reads
//	  protected: [scripts/check.sh] # read-only like .git (relative: to the workspace)
type sandboxDef struct {
	// DenyRead are added to sandbox.DefaultDenyRead($HOME, $DSH_HOME).
	DenyRead []string `yaml:"deny_read,omitempty"`
	// AllowRead removes an entry of the deny-read list; a path inside an
	// entry becomes a readable exception in it.
	AllowRead []string `yaml:"allow_read,omitempty"`
	// ConfineReads: reads only in the workspace, the writable roots,
	// ReadRoots and the system directories.
	ConfineReads bool `yaml:"confine_reads,omitempty"`
	// ReadRoots are readable under ConfineReads.
	ReadRoots []string `yaml:"read_roots,omitempty"`
	// Protected stay read-only inside the writable roots.
	Protected []string `yaml:"protected,omitempty"`
}

// validate checks the paths' shape: after ~ expands, the read paths are
// absolute; protected ones may be relative to the workspace.
func (d sandboxDef) validate() error {
	for key, list := range map[string][]string{"deny_read": d.DenyRead, "allow_read": d.AllowRead, "read_roots": d.ReadRoots} {
		if _, err := absPaths(key, list); err != nil {
			return err
		}
	}
	for _, p := range d.Protected {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("protected: empty path")
		}
	}
	return nil
}

// reads resolves the block for a user whose $DSH_HOME is dshHome.
//
// Run as root, the host's own secrets (sandbox.SystemSecrets) are
// denied too. $DSH_HOME is denied whole (its database holds every session's prompts
// and tool output, serve/token the API's key, config.yaml provider
// keys), except $DSH_HOME/skills: the skill tool points the model at a
// skill's bundled files, which it reads and runs.
func (d sandboxDef) reads(dshHome string) (permission.Reads, error) {
	var r permission.Reads
	home, _ := os.UserHomeDir()
	if dshHome != "" {
		// The deny list holds absolute paths only.
		if abs, err := filepath.Abs(dshHome); err == nil {
			dshHome = abs
		}
	}
	deny := sandbox.DefaultDenyRead(home, dshHome)
	if os.Geteuid() == 0 {
		deny = append(deny, sandbox.SystemSecrets()...)
	}
	extra, err := absPaths("deny_read", d.DenyRead)
	if err != nil {
		return r, err
	}
	deny = append(deny, extra...)
	allow, err := absPaths("allow_read", d.AllowRead)
	if err != nil {
		return r, err
	}
	var exceptions []string
	if dshHome != "" {
		exceptions = append(exceptions, filepath.Join(dshHome, "skills"))
	}
	for _, a := range allow {
		if slices.Contains(deny, a) {
			deny = slices.DeleteFunc(deny, func(e string) bool { return e == a })
			continue
		}
		inside := false
		for _, e := range deny {
			if strings.HasPrefix(a, e+"/") {
				inside = true
			}
		}
		if !inside {
			return r, fmt.Errorf("allow_read: %s is not on the deny-read list nor inside one of its entries (%s)", a, strings.Join(deny, ", "))
		}
		exceptions = append(exceptions, a)
	}
	roots, err := absPaths("read_roots", d.ReadRoots)
	if err != nil {
		return r, err
	}
	slices.Sort(deny)
	r.DenyRead = slices.Compact(deny)
	r.ConfineReads = d.ConfineReads
	r.ReadRoots = append(roots, exceptions...)
	r.Protected = slices.Clone(d.Protected)
	return r, nil
}

// absPaths expands a leading ~ and requires absolute paths, cleaned.
func absPaths(key string, list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, p := range list {
		q := strings.TrimSpace(p)
		if q == "~" || strings.HasPrefix(q, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", key, p, err)
			}
			q = filepath.Join(home, q[1:])
		}
		if !filepath.IsAbs(q) {
			return nil, fmt.Errorf("%s: %q is not an absolute path (after ~ expands)", key, p)
		}
		out = append(out, filepath.Clean(q))
	}
	return out, nil
}
