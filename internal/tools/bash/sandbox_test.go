package bash

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
)

// fakeSandbox stands in for a backend: it records what it was asked to
// confine and replaces the command with a script (or runs it as is when
// script is ""). The real backends are tested in internal/sandbox.
type fakeSandbox struct {
	script string
	policy sandbox.Policy
	env    []string
	err    error
	denied func(int, []byte) bool

	gotArgv []string
	gotCall *tool.Call
}

func (f *fakeSandbox) confine(c *tool.Call, argv []string) (Confinement, error) {
	f.gotArgv, f.gotCall = argv, c
	if f.err != nil {
		return Confinement{}, f.err
	}
	out := argv
	if f.script != "" {
		out = []string{"sh", "-c", f.script}
	}
	return Confinement{
		Confined: sandbox.Confined{Argv: out, Env: f.env, Backend: "fake", Enforcement: sandbox.Full, Denied: f.denied},
		Policy:   f.policy,
	}, nil
}

// deniedBy reports a denial when the command failed and printed sig.
func deniedBy(sig string) func(int, []byte) bool {
	return func(exit int, out []byte) bool { return exit != 0 && strings.Contains(string(out), sig) }
}

func TestSandboxSchemaAndDescription(t *testing.T) {
	plain := New(Options{})
	if strings.Contains(plain.Description, "sandbox") || strings.Contains(plain.Description, "<!--") ||
		strings.Contains(string(plain.Parameters), "sandbox_permissions") || strings.Contains(plain.Description, "\n\n\n") {
		t.Fatalf("unconfined tool mentions the sandbox:\n%s\n%s", plain.Description, plain.Parameters)
	}
	f := &fakeSandbox{}
	def := New(Options{Confine: f.confine})
	if !strings.Contains(def.Description, "retry the identical command once with `sandbox_permissions`") || strings.Contains(def.Description, "<!--") {
		t.Fatalf("description:\n%s", def.Description)
	}
	var schema struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(def.Parameters, &schema); err != nil {
		t.Fatalf("%v: %s", err, def.Parameters)
	}
	if len(schema.Properties) != 6 || len(schema.Required) != 1 ||
		!slices.Equal(schema.Properties["sandbox_permissions"].Enum, []string{"workspace-write", "danger-full-access", "network"}) {
		t.Fatalf("schema %s", def.Parameters)
	}
	if _, ok := schema.Properties["justification"]; !ok {
		t.Fatalf("no justification in %s", def.Parameters)
	}
}

func TestSandboxedRun(t *testing.T) {
	ws := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: "/w"}
	ro := sandbox.Policy{Mode: sandbox.ReadOnly, Workspace: "/w"}
	tests := []struct {
		name       string
		box        fakeSandbox
		cmd        string
		want       string // exact content
		wantDenied bool
		wantMode   string
	}{
		{"file denial", fakeSandbox{
			script: `echo "touch: cannot touch '/etc/x': Read-only file system" >&2; exit 1`,
			policy: ws, denied: deniedBy("Read-only file system")}, "touch /etc/x",
			"touch: cannot touch '/etc/x': Read-only file system\n\n[exit code: 1]\n" +
				"[sandbox: file access denied — the command tried to write outside the writable roots of workspace-write mode]",
			true, "workspace-write"},
		{"network denial", fakeSandbox{
			script: `echo "curl: (6) Could not resolve host: example.com" >&2; exit 6`,
			policy: ro, denied: deniedBy("Could not resolve host")}, "curl https://example.com",
			"curl: (6) Could not resolve host: example.com\n\n[exit code: 6]\n" +
				"[sandbox: network access denied — network access is off in read-only mode]",
			true, "read-only"},
		{"network signature with network on is a file denial", fakeSandbox{
			script: `echo "Could not resolve host; Permission denied" >&2; exit 1`,
			policy: sandbox.Policy{Mode: sandbox.WorkspaceWrite, Network: true}, denied: deniedBy("denied")}, "x",
			"Could not resolve host; Permission denied\n\n[exit code: 1]\n" +
				"[sandbox: file access denied — the command tried to write outside the writable roots of workspace-write mode]",
			true, "workspace-write"},
		{"socket denial", fakeSandbox{
			script: `echo "` + sandbox.SocketDeniedPrefix + `/var/run/docker.sock" >&2; echo "PermissionError: [Errno 13] Permission denied" >&2; exit 1`,
			policy: ro, denied: deniedBy("Permission denied")}, "docker ps",
			sandbox.SocketDeniedPrefix + "/var/run/docker.sock\nPermissionError: [Errno 13] Permission denied\n\n[exit code: 1]\n" +
				"[sandbox: socket access denied — connecting to the UNIX socket /var/run/docker.sock is not allowed in read-only mode: " +
				"only sockets inside the workspace, the writable roots, $TMPDIR and those the profile allows are reachable]",
			true, "read-only"},
		{"not denied", fakeSandbox{policy: ws, denied: deniedBy("Read-only file system")}, "echo fine",
			"fine\n\n[exit code: 0]", false, "workspace-write"},
		{"an ordinary failure is not a denial", fakeSandbox{policy: ws, denied: deniedBy("Read-only file system")}, "echo nope >&2; exit 2",
			"nope\n\n[exit code: 2]", false, "workspace-write"},
		{"wrapper environment reaches the command", fakeSandbox{policy: ws, env: []string{"WRAPPED=yes"}}, "echo $WRAPPED",
			"yes\n\n[exit code: 0]", false, "workspace-write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Confine: tt.box.confine})
			r := h.run(context.Background(), t, map[string]any{"command": tt.cmd})
			if r.IsError || text(r) != tt.want {
				t.Fatalf("got isError=%v %q\nwant %q", r.IsError, text(r), tt.want)
			}
			m := metaOf(t, r)
			if m.SandboxDenied != tt.wantDenied || m.SandboxMode != tt.wantMode {
				t.Fatalf("meta %+v", m)
			}
			if !slices.Equal(tt.box.gotArgv, []string{"bash", "-c", tt.cmd}) || tt.box.gotCall == nil || tt.box.gotCall.ID != "c1" {
				t.Fatalf("confiner got %q for %+v", tt.box.gotArgv, tt.box.gotCall)
			}
		})
	}
}

func TestConfineFailureRunsNothing(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode string
		wantText string
	}{
		{"no backend", errors.Join(sandbox.ErrUnavailable, errors.New("bwrap: no user namespaces")), sandbox.CodeUnavailable,
			"Error: the command was not run because it could not be sandboxed: " + sandbox.ErrUnavailable.Error()},
		{"tool error keeps its code", tool.Errorf("SANDBOX_POLICY", "bad policy"), "SANDBOX_POLICY", "Error: bad policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSandbox{err: tt.err}
			h := newHarness(t, Options{Confine: f.confine})
			r := h.run(context.Background(), t, map[string]any{"command": "touch ran"})
			if !r.IsError || code(r) != tt.wantCode || !strings.HasPrefix(text(r), tt.wantText) {
				t.Fatalf("got code=%q %q", code(r), text(r))
			}
			if _, err := os.Stat(filepath.Join(h.cwd, "ran")); !os.IsNotExist(err) {
				t.Fatalf("the command ran: %v", err)
			}
		})
	}
}

func TestEscalationArgs(t *testing.T) {
	f := &fakeSandbox{policy: sandbox.Policy{Mode: sandbox.WorkspaceWrite}}
	h := newHarness(t, Options{Confine: f.confine})
	tests := []struct {
		name string
		args map[string]any
		want string // "" = valid
	}{
		{"valid", map[string]any{"command": "true", "sandbox_permissions": "network", "justification": "fetch deps"}, ""},
		{"null placeholders", map[string]any{"command": "true", "sandbox_permissions": nil, "justification": nil}, ""},
		{"unknown permission", map[string]any{"command": "true", "sandbox_permissions": "root", "justification": "x"}, "sandbox_permissions must be"},
		{"not a string", map[string]any{"command": "true", "sandbox_permissions": true, "justification": "x"}, "sandbox_permissions must be a string"},
		{"missing justification", map[string]any{"command": "true", "sandbox_permissions": "danger-full-access"}, "justification is required"},
		{"blank justification", map[string]any{"command": "true", "sandbox_permissions": "danger-full-access", "justification": " "}, "justification is required"},
		{"justification alone", map[string]any{"command": "true", "justification": "because"}, "only used with sandbox_permissions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(context.Background(), t, tt.args)
			if tt.want == "" {
				if r.IsError {
					t.Fatalf("rejected: %q", text(r))
				}
				return
			}
			if code(r) != tool.CodeInvalidArgs || !strings.Contains(text(r), tt.want) {
				t.Fatalf("got code=%q %q, want %q", code(r), text(r), tt.want)
			}
		})
	}
}
