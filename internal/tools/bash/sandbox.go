package bash

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Confinement is a command wrapped for the sandbox together with the
// policy it runs under (the result names the mode when the sandbox
// refuses something).
type Confinement struct {
	sandbox.Confined
	Policy sandbox.Policy
}

// Values of the sandbox_permissions parameter: a wider sandbox mode, or
// network access within the current mode.
const (
	EscalateWorkspaceWrite = string(sandbox.WorkspaceWrite)
	EscalateFullAccess     = string(sandbox.DangerFullAccess)
	EscalateNetwork        = "network"
)

// escalationParams is the schema of the escalation parameters, offered
// only when commands are confined (there is nothing to escalate
// otherwise).
func escalationParams(o Options) string {
	if o.Confine == nil {
		return ""
	}
	return `,"sandbox_permissions":{"type":"string","enum":["` + EscalateWorkspaceWrite + `","` + EscalateFullAccess + `","` + EscalateNetwork + `"],` +
		`"description":"Only to retry a command the sandbox refused (its output ended with a [sandbox: …] line): the wider permission the retry needs. The retry must be the identical command and needs approval; one retry per denial."},` +
		`"justification":{"type":"string","description":"Required with sandbox_permissions: why the command needs the wider permission, shown to whoever approves it."}`
}

// checkEscalation validates the escalation parameters' shape; whether an
// escalation is allowed is decided by policy before the call runs.
func checkEscalation(a args) error {
	switch a.SandboxPermissions {
	case "":
		if a.Justification != "" {
			return invalid("justification is only used with sandbox_permissions")
		}
		return nil
	case EscalateWorkspaceWrite, EscalateFullAccess, EscalateNetwork:
	default:
		return invalid("sandbox_permissions must be %s, %s or %s", EscalateWorkspaceWrite, EscalateFullAccess, EscalateNetwork)
	}
	if strings.TrimSpace(a.Justification) == "" {
		return invalid("justification is required with sandbox_permissions")
	}
	return nil
}

// confineError is the result error of a command that could not be
// confined: it keeps a *tool.Error's code and is SANDBOX_UNAVAILABLE
// otherwise. The command is never run unconfined instead.
func confineError(err error) error {
	var te *tool.Error
	if errors.As(err, &te) {
		return te
	}
	return &tool.Error{
		Name:    "SandboxError",
		Code:    sandbox.CodeUnavailable,
		Message: "the command was not run because it could not be sandboxed: " + err.Error(),
	}
}

// Signatures that tell a network refusal from a file refusal in the
// output of a command the sandbox denied.
var (
	fileDenial = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)read-only file system|permission denied|operation not permitted`)
	})
	netDenial = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)could not resolve|name resolution|name or service not known|no such host|network is unreachable|dial tcp|getaddrinfo`)
	})
)

// denialMarker is the plain line that ends the result of a command the
// sandbox refused: the model reads it to decide whether to escalate.
func denialMarker(p sandbox.Policy, output []byte) string {
	if _, rest, ok := bytes.Cut(output, []byte(sandbox.SocketDeniedPrefix)); ok {
		path, _, _ := bytes.Cut(rest, []byte("\n"))
		return fmt.Sprintf("[sandbox: socket access denied — connecting to the UNIX socket %s is not allowed in %s mode: "+
			"only sockets inside the workspace, the writable roots, $TMPDIR and those the profile allows are reachable]", path, p.Mode)
	}
	if d := p.ReadDenialIn(output); d != "" {
		return fmt.Sprintf("[sandbox: read access denied — reading %s is not allowed in %s mode: it is on the sandbox's deny-read list "+
			"(credentials and dsh's own state), which only danger-full-access lifts]", d, p.Mode)
	}
	if !p.Network && netDenial().Match(output) && !fileDenial().Match(output) {
		return fmt.Sprintf("[sandbox: network access denied — network access is off in %s mode]", p.Mode)
	}
	return fmt.Sprintf("[sandbox: file access denied — the command tried to write outside the writable roots of %s mode]", p.Mode)
}

// sandboxSection keeps (without its markers) or drops the part of the
// description that applies only when commands are confined.
func sandboxSection(doc string, confined bool) string {
	return docSection(doc, "sandbox", confined)
}
