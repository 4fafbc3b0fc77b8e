package permission

import (
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// ReadChecker reports whether reading path is allowed under p; a refusal
// is an error (sandbox.Policy.CheckRead as a method expression).
type ReadChecker func(p sandbox.Policy, path string) error

// readTools are the tools the read fence checks, the argument naming
// what they read, and whether a missing argument means the call's cwd
// (grep and glob search it by default).
var readTools = map[string]struct {
	field      string
	defaultCwd bool
}{
	"read":                        {"file_path", false},
	"read_image":                  {"file_path", false},
	"edit":                        {"file_path", false},
	"write":                       {"file_path", false},
	"grep":                        {"path", true},
	"glob":                        {"path", true},
	"str_replace_based_edit_tool": {"path", false},
}

// ReadFence is a tool.Guard that applies the session's read rules (the
// sandbox's deny-read list, and read confinement where the policy has
// it: sandbox.Policy.DenyRead, ConfineReads) to the file tools that read
// (read, read_image, grep, glob, edit and write of an existing file,
// str_replace_based_edit_tool), so they are no read path around the
// sandbox. It checks the path before the call; the tools check the file
// they actually opened again (fs.Fence), which a symlink swapped in
// after this check cannot get past. policy is BashConfiner.Policy, the
// policy bash commands get.
func ReadFence(check ReadChecker, policy func(c *tool.Call) sandbox.Policy) tool.Guard {
	return func(c *tool.Call) string {
		spec, ok := readTools[c.Name]
		if !ok {
			return ""
		}
		_, target, ok := fileArg(c, spec.field)
		if !ok {
			return ""
		}
		if strings.TrimSpace(target) == "" {
			if !spec.defaultCwd {
				return ""
			}
			target = "."
		}
		path, p, err := fenceCheck(c, target, check, policy)
		if err == nil {
			return ""
		}
		return fmt.Sprintf("[sandbox: file access denied — reading %s is not allowed in %s mode: %s] "+
			"The sandbox keeps it from every file tool and command; do not try to read it another way.",
			path, p.Mode, deniedDetail(err, path, p.Mode))
	}
}

// deniedDetail keeps the reason of a sandbox refusal, whose message reads
// "sandbox: file access denied: PATH (MODE: REASON)".
func deniedDetail(err error, path string, mode sandbox.Mode) string {
	detail := strings.TrimPrefix(err.Error(), "sandbox: file access denied: ")
	detail = strings.TrimPrefix(detail, path+" ")
	if inner, ok := strings.CutPrefix(detail, "("+string(mode)+": "); ok {
		detail = strings.TrimSuffix(inner, ")")
	}
	return detail
}
