package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// Confiner wraps a command for the sandbox (the sandbox package's
// backends implement it).
type Confiner interface {
	Confine(argv []string, p sandbox.Policy) (sandbox.Confined, error)
}

// Supervisor is what a Confiner may also do: wrap a command that runs
// unconfined (danger-full-access) so that nothing it starts outlives it
// (*sandbox.Sandbox).
type Supervisor interface {
	Supervise(argv []string) sandbox.Confined
}

// WriteChecker reports whether a write to path is allowed under p; a
// refusal is an error (the sandbox package's Policy.CheckWrite, as a
// method expression: sandbox.Policy.CheckWrite).
type WriteChecker func(p sandbox.Policy, path string) error

// BashConfiner is the bash tool's Confine option: it builds each call's
// sandbox policy and wraps the command with the Confiner.
//
// The policy: the mode is the call's approved escalation, else the
// session's mode (last sandbox/mode event, else the default). The
// writable root is Workspace — the session cwd, not its enclosing git
// repository, because a session started below a repository (or in a
// home directory that is itself a dotfiles repository) must not get
// write access to everything above it; a user who wants the whole
// repository starts the session at its root. WritableRoots are added in
// workspace-write. The network is off except in danger-full-access or
// with an approved network escalation.
type BashConfiner struct {
	Sandbox  Confiner
	Log      *session.Log
	Defaults Defaults
	// Workspace is the writable root in workspace-write; "" uses the
	// call's Cwd (the session cwd).
	Workspace string
	// WritableRoots are extra writable directories in workspace-write.
	WritableRoots []string
	// UnixSockets are the UNIX sockets outside the workspace that
	// commands may connect to, in every confined mode.
	UnixSockets []string
	// Reads are applied to every confined policy (see Reads).
	Reads Reads
	// Protected returns more paths that stay read-only (the files
	// trusted hooks run), asked for every call so that a file trusted
	// mid-session is protected from then on; nil is none.
	Protected func() []string
	Grants    *Grants
	// PlanMode, when it reports true, clamps every command to the
	// read-only sandbox and ignores escalation grants (see Config).
	PlanMode func() bool

	mu     sync.Mutex
	logged *SandboxBackend // guarded by mu; the last sandbox/backend on the log
	read   bool            // guarded by mu; logged was read from the log
}

// Policy is the call's policy without any escalation: what the session
// allows. The write fence uses it for file tools.
func (b *BashConfiner) Policy(c *tool.Call) sandbox.Policy {
	ws := b.Workspace
	if ws == "" {
		ws = c.Cwd
	}
	mode := b.Defaults.Current(b.Log).Mode
	if b.planMode() {
		mode = sandbox.ReadOnly
	}
	return b.policyAt(mode, ws, false)
}

// policyAt is the session's policy in mode: the mode's roots plus what
// holds in every mode (sockets, deny-read, read confinement, protected
// paths), so an escalation changes the mode and nothing else.
func (b *BashConfiner) policyAt(mode sandbox.Mode, ws string, network bool) sandbox.Policy {
	p := policyFor(mode, ws, b.WritableRoots, network)
	p.UnixSockets = slices.Clone(b.UnixSockets)
	b.Reads.apply(&p)
	if b.Protected != nil {
		p.Protected = append(p.Protected, b.Protected()...)
	}
	return p
}

// Reads is the read side of a session's sandbox policy, and the paths
// that stay read-only besides the git metadata and the agent
// configuration: the same in every confined mode and through an
// escalation short of danger-full-access (which is unconfined by
// design).
type Reads struct {
	// DenyRead are the absolute paths no confined command or file tool
	// may read (sandbox.DefaultDenyRead adjusted by the configuration).
	DenyRead []string
	// ConfineReads limits reads to the workspace, the writable roots,
	// ReadRoots and the system directories.
	ConfineReads bool
	// ReadRoots are readable although inside a DenyRead entry, and
	// under ConfineReads beside the system directories.
	ReadRoots []string
	// Protected stay read-only inside the writable roots.
	Protected []string
}

func (r Reads) apply(p *sandbox.Policy) {
	p.DenyRead = slices.Clone(r.DenyRead)
	p.ConfineReads = r.ConfineReads
	p.ReadRoots = slices.Clone(r.ReadRoots)
	p.Protected = slices.Clone(r.Protected)
}

func (b *BashConfiner) planMode() bool { return b.PlanMode != nil && b.PlanMode() }

func policyFor(mode sandbox.Mode, ws string, roots []string, network bool) sandbox.Policy {
	p := sandbox.Policy{Mode: mode, Workspace: ws, Network: network || mode == sandbox.DangerFullAccess}
	if mode == sandbox.WorkspaceWrite {
		p.WritableRoots = slices.Clone(roots)
	}
	return p
}

// Confine implements bash.Options.Confine. danger-full-access runs the
// command unconfined (under the sandbox's lifetime-only supervisor when
// it has one); every other mode goes through the Confiner, whose
// errors (SANDBOX_UNAVAILABLE) are returned unchanged, so a command never
// runs unconfined because the sandbox failed.
func (b *BashConfiner) Confine(c *tool.Call, argv []string) (bash.Confinement, error) {
	p := b.Policy(c)
	if g, ok := b.Grants.take(c.ID); ok && !b.planMode() && approvedOnLog(b.Log, c.ID) {
		if g.Mode.Rank() > p.Mode.Rank() {
			p = b.policyAt(g.Mode, p.Workspace, p.Network)
		}
		p.Network = p.Network || g.Network
	}
	if p.Mode == sandbox.DangerFullAccess {
		conf := sandbox.Unconfined(argv)
		// Unconfined, but what the command starts still ends with it
		// where the sandbox can supervise (*sandbox.Sandbox).
		if s, ok := b.Sandbox.(Supervisor); ok {
			conf = s.Supervise(argv)
		}
		return bash.Confinement{Confined: conf, Policy: p}, nil
	}
	if b.Sandbox == nil {
		return bash.Confinement{}, &tool.Error{Name: "SandboxError", Code: sandbox.CodeUnavailable,
			Message: "the command was not run: " + sandbox.ErrUnavailable.Error()}
	}
	conf, err := b.Sandbox.Confine(argv, p)
	if err != nil {
		return bash.Confinement{}, err
	}
	if err := b.logBackend(conf); err != nil {
		return bash.Confinement{}, err
	}
	return bash.Confinement{Confined: conf, Policy: p}, nil
}

// logBackend appends sandbox/backend when the backend or its enforcement
// differs from the last one on the log (once per session, normally).
func (b *BashConfiner) logBackend(conf sandbox.Confined) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.read {
		b.read = true
		var p SandboxBackend
		if ev, ok := b.Log.Latest(session.TypeSandboxBackend); ok && ev.Decode(&p) == nil {
			b.logged = &p
		}
	}
	cur := SandboxBackend{Backend: conf.Backend, Enforcement: conf.Enforcement, Gaps: conf.Gaps}
	if b.logged != nil && b.logged.Backend == cur.Backend && b.logged.Enforcement == cur.Enforcement && slices.Equal(b.logged.Gaps, cur.Gaps) {
		return nil
	}
	if _, err := b.Log.Append(session.TypeSandboxBackend, cur); err != nil {
		return err
	}
	b.logged = &cur
	return nil
}

// approvedOnLog reports whether the latest run of callID was approved:
// an approval/decided allowed-once whose approval/asked names the call,
// after the call's tool/call event.
func approvedOnLog(log *session.Log, callID string) bool {
	allowed := map[string]bool{}
	for ev := range log.View().Backward() {
		switch ev.Type {
		case session.TypeApprovalDecided:
			var d ApprovalDecided
			if ev.Decode(&d) == nil && d.Outcome == tool.AllowedOnce {
				allowed[d.ID] = true
			}
		case session.TypeApprovalAsked:
			var a ApprovalAsked
			if ev.Decode(&a) == nil && a.CallID == callID && allowed[a.ID] {
				return true
			}
		case session.TypeToolCall:
			if ev.Released() {
				// Rare (a grant is being used): read the call back.
				// One that cannot be read is not this call's proof.
				var err error
				if ev, err = log.At(context.Background(), ev.Seq); err != nil {
					return false
				}
			}
			var tc session.ToolCall
			if ev.Decode(&tc) == nil && tc.CallID == callID {
				return false
			}
		}
	}
	return false
}

// Tools the write fence checks, and the argument naming their target.
var fencedTools = map[string]string{
	"write":                       "file_path",
	"edit":                        "file_path",
	"str_replace_based_edit_tool": "path",
}

// WriteFence is a tool.Guard that applies the session's sandbox mode to
// the file tools (write, edit, and str_replace_based_edit_tool except
// view), so they are no second write path around the sandbox. The target
// path is resolved against the call's cwd and checked with check under
// policy(c) (BashConfiner.Policy). File tools do not escalate: the
// denial tells the model to make a write that is really needed with
// bash, whose sandbox denial can then be escalated with approval, so
// there is one escalation path with one set of rules.
func WriteFence(check WriteChecker, policy func(c *tool.Call) sandbox.Policy) tool.Guard {
	return func(c *tool.Call) string {
		field, ok := fencedTools[c.Name]
		if !ok {
			return ""
		}
		args, target, ok := fileArg(c, field)
		if !ok {
			return ""
		}
		if c.Name == "str_replace_based_edit_tool" {
			var cmd string
			if json.Unmarshal(args["command"], &cmd) == nil && cmd == "view" {
				return ""
			}
		}
		if strings.TrimSpace(target) == "" {
			return ""
		}
		path, p, err := fenceCheck(c, target, check, policy)
		if err == nil {
			return ""
		}
		// Only the refusal's reason: the rest is said below.
		detail := deniedDetail(err, path, p.Mode)
		return fmt.Sprintf("[sandbox: file access denied — writing %s is not allowed in %s mode: %s] "+
			"File tools cannot escalate. If this write is really needed, make it with a bash command; "+
			"if the sandbox refuses that command, you may retry it once with sandbox_permissions and a justification.",
			path, p.Mode, detail)
	}
}

// fileArg returns the arguments of the file tool call c and its argument
// field, the path the tool reads or writes ("" where it is absent or
// null). ok is false where the arguments are not a JSON object or field
// is not a string: the tool reports malformed arguments itself, and the
// fences let the call through to it.
func fileArg(c *tool.Call, field string) (args map[string]json.RawMessage, target string, ok bool) {
	if json.Unmarshal(c.Arguments, &args) != nil {
		return nil, "", false
	}
	if raw, ok := args[field]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &target) != nil {
			return nil, "", false
		}
	}
	return args, target, true
}

// fenceCheck resolves target against c's cwd (resolvePath) and checks it
// with check under policy(c), returning the path, the policy and the
// refusal; a danger-full-access policy refuses nothing and is not asked.
func fenceCheck(c *tool.Call, target string, check func(sandbox.Policy, string) error, policy func(c *tool.Call) sandbox.Policy) (string, sandbox.Policy, error) {
	p := policy(c)
	if p.Mode == sandbox.DangerFullAccess {
		return "", p, nil
	}
	path := resolvePath(c.Cwd, target)
	return path, p, check(p, path)
}

// resolvePath makes target absolute the way the file tools do: "~"
// expands to the home directory, relative paths are taken against cwd.
func resolvePath(cwd, target string) string {
	if target == "~" || strings.HasPrefix(target, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			target = filepath.Join(home, target[1:])
		}
	}
	if !filepath.IsAbs(target) {
		if cwd == "" {
			cwd, _ = os.Getwd()
		}
		target = filepath.Join(cwd, target)
	}
	return filepath.Clean(target)
}
