package permission

import (
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

// Runtime-context section names and their order among the sections.
const (
	SectionSandbox  = "sandbox:policy"
	SectionApproval = "approval:policy"
	sectionOrder    = 20
)

// RuntimeOptions says what the runtime sections describe.
type RuntimeOptions struct {
	// State returns the session's current state (e.g. Defaults.Current
	// bound to the log). Required.
	State func() State
	// Workspace is the writable root in workspace-write.
	Workspace string
	// WritableRoots are the extra writable directories in workspace-write.
	WritableRoots []string
	// UnixSockets are the UNIX sockets outside the workspace that
	// commands may connect to.
	UnixSockets []string
	// Human reports whether a human answerer is attached (a terminal);
	// nil means none.
	Human func() bool
	// Reviewer reports whether an automatic reviewer is configured.
	Reviewer bool
	// PlanMode reports whether plan mode clamps the sandbox to read-only
	// (nil: never).
	PlanMode func() bool
	// Reads are the session's read rules (deny-read list, confined
	// reads), said after the mode.
	Reads Reads
}

// planModeSandbox is the sandbox section while plan mode is on.
const planModeSandbox = "Sandbox mode: read-only while plan mode is on, whatever the session's permission preset. " +
	"Shell commands and file tools may read everywhere but write nowhere (only /dev/null), and network access is off. " +
	"There is no escalation in plan mode."

// RuntimeSections returns the sandbox:policy and approval:policy sections.
// The policy reaches the model through the runtime-context snapshot rather
// than the system prompt, so that a change is a logged message and the
// system prompt stays cacheable.
func RuntimeSections(o RuntimeOptions) []prompt.RuntimeSection {
	return []prompt.RuntimeSection{
		{Name: SectionSandbox, Order: sectionOrder, Render: func() string {
			st := o.State()
			if o.PlanMode != nil && o.PlanMode() {
				return planModeSandbox + ReadsText(sandbox.ReadOnly, o.Reads)
			}
			return SandboxText(st, o.Workspace, o.WritableRoots, o.UnixSockets) + ReadsText(st.Mode, o.Reads)
		}},
		{Name: SectionApproval, Order: sectionOrder + 1, Render: func() string {
			return ApprovalText(o.State(), o.Human != nil && o.Human(), o.Reviewer)
		}},
	}
}

// SandboxText describes the sandbox mode in plain words: what may be
// written, whether the network is on, which UNIX sockets commands may
// connect to and how to escalate.
func SandboxText(st State, workspace string, roots, sockets []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Sandbox mode: %s. ", st.Mode)
	switch st.Mode {
	case sandbox.DangerFullAccess:
		b.WriteString("Nothing is confined: shell commands and file tools may write anywhere and use the network. There is nothing to escalate.")
		return b.String()
	case sandbox.ReadOnly:
		b.WriteString("Shell commands and file tools may read everywhere but write nowhere (only /dev/null). Network access is off. " +
			"Connecting to a UNIX socket outside the workspace and $TMPDIR (such as /var/run/docker.sock, an ssh-agent, or a tmux or X11 socket in /tmp) is refused")
		socketsText(&b, sockets)
	default:
		fmt.Fprintf(&b, "Shell commands and file tools may read everywhere but write only inside the workspace %s", workspace)
		if len(roots) > 0 {
			fmt.Fprintf(&b, " and in %s", strings.Join(roots, ", "))
		}
		b.WriteString("; writes elsewhere are refused. Network access is off. " +
			"Connecting to a UNIX socket outside these directories and $TMPDIR (such as /var/run/docker.sock, an ssh-agent, or a tmux or X11 socket in /tmp) is refused")
		socketsText(&b, sockets)
	}
	wider := "`workspace-write` (to write in the workspace) or `danger-full-access` (to write anywhere)"
	if st.Mode == sandbox.WorkspaceWrite {
		wider = "`danger-full-access` (to write outside the workspace)"
	}
	b.WriteString("\nWhen a bash command fails because of the sandbox, its output ends with a line starting `[sandbox: `. " +
		"Only then, and only if the action is really needed, retry the same command once with `sandbox_permissions` set to " +
		wider + " or `network` (for network access), and a `justification` saying why; the retry runs only if it is approved. " +
		"File tools cannot escalate: if such a write is needed, make it with a bash command.")
	return b.String()
}

// ReadsText is what SandboxText's "may read everywhere" leaves out: the
// deny-read list and confined reads, which hold in every mode but
// danger-full-access. Empty when there is nothing to say.
func ReadsText(mode sandbox.Mode, r Reads) string {
	if mode == sandbox.DangerFullAccess {
		return ""
	}
	var b strings.Builder
	if r.ConfineReads {
		b.WriteString("\nReads are confined: shell commands and file tools may read only the workspace, the writable directories")
		if len(r.ReadRoots) > 0 {
			fmt.Fprintf(&b, ", %s", strings.Join(r.ReadRoots, ", "))
		}
		b.WriteString(" and the system directories (/usr, /etc, /bin, /lib…); $HOME and other repositories are not readable.")
	}
	if len(r.DenyRead) > 0 {
		fmt.Fprintf(&b, "\nReading these paths is denied (credentials and dsh's own state), with \"Permission denied\": %s. "+
			"Do not try to get around it: no escalation short of danger-full-access lifts it.", strings.Join(r.DenyRead, ", "))
	}
	return b.String()
}

// socketsText ends the socket sentence with the allowed sockets.
func socketsText(b *strings.Builder, sockets []string) {
	if len(sockets) > 0 {
		fmt.Fprintf(b, ", except %s, which the profile allows", strings.Join(sockets, ", "))
	}
	b.WriteString("; the `network` permission does not change that.")
}

// ApprovalText describes whether approval requests will be answered.
func ApprovalText(st State, human, reviewer bool) string {
	const what = "Calls that need approval are sandbox escalations and commands a permission rule marks for asking."
	switch {
	case st.Approval == ApprovalNever:
		return "Approval policy: never. " + what + " No one answers them: they are denied at once, so work within the sandbox."
	case st.AutoReview() && reviewer:
		fallback := "high- and medium-risk calls are refused"
		if human {
			fallback = "high-risk calls are refused and medium-risk calls are shown to the user"
		}
		return "Approval policy: auto review. " + what + " An automatic reviewer judges each one against the user's task and recent instructions: low-risk calls are allowed once, " + fallback + "."
	case human:
		return "Approval policy: ask. " + what + " They are shown to the user, who allows each one once or denies it."
	default:
		return "Approval policy: ask. " + what + " No one is available to answer them in this session, so they are denied; work within the sandbox."
	}
}
