//go:build linux

package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/strreplace"
)

// secretKey is the content of the fake private key the deny-read tests
// guard.
const secretKey = "-----BEGIN OPENSSH PRIVATE KEY----- SECRET-d5h-key"

// denyRig is a fake HOME with ~/.ssh/id_rsa beside a workspace holding
// links to it and a denied file of its own, under a policy whose
// deny-read list covers ~/.ssh and that file.
type denyRig struct {
	home, ws, key string
	policy        sandbox.Policy
}

func newDenyRig(t *testing.T) *denyRig {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := &denyRig{home: filepath.Join(root, "home"), ws: filepath.Join(root, "ws")}
	d.key = filepath.Join(d.home, ".ssh", "id_rsa")
	files := map[string]string{
		d.key:                                   secretKey + "\n",
		filepath.Join(d.home, ".ssh", "config"): "Host x SECRET-d5h-config\n",
		// Beside the denied places, and one that shares a prefix.
		filepath.Join(d.home, "notes.txt"):       "plain notes\n",
		filepath.Join(d.home, ".sshx", "config"): "plain sshx\n",
		filepath.Join(d.ws, "main.go"):           "package main // plain\n",
		filepath.Join(d.ws, "secret.env"):        "TOKEN=SECRET-d5h-env\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"keylink": d.key, "sshlink": filepath.Join(d.home, ".ssh")} {
		if err := os.Symlink(target, filepath.Join(d.ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	d.policy = sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: d.ws,
		DenyRead: []string{filepath.Join(d.home, ".ssh"), filepath.Join(d.ws, "secret.env")}}
	return d
}

func runTool(p *tool.Pipeline, cwd, name string, args map[string]any) tool.Result {
	raw, _ := json.Marshal(args)
	return p.Run(context.Background(), &tool.Call{ID: "c", Name: name, RawArguments: string(raw), Cwd: cwd, SessionID: "s"})
}

// outcome is a result's text, or its error's message.
func outcome(r tool.Result) string {
	if r.IsError {
		return r.Error.Message
	}
	return resultText(r)
}

// TestFileToolsDenyRead is finding 6 of issue 24 through every file
// tool: with ~/.ssh (and a workspace file) on the deny-read list, read,
// read_image, grep, glob, view, edit, str_replace and write of the key,
// of a workspace symlink to it and through a symlinked directory all
// fail with the sandbox's clear denial, never an empty or partial
// result; files beside it (and one whose name shares its prefix) still
// read, and searches of their parent skip the denied directory and say
// so. It runs behind the guards (what dsh wires) and, to show the
// tools' own checks hold on their own, without them.
func TestFileToolsDenyRead(t *testing.T) {
	for _, guards := range []bool{true, false} {
		t.Run(fmt.Sprintf("guards=%v", guards), func(t *testing.T) {
			d := newDenyRig(t)
			p := fileTools(func(*tool.Call) sandbox.Policy { return d.policy }, guards)
			run := func(name string, args map[string]any) tool.Result { return runTool(p, d.ws, name, args) }
			denied := func(what string, r tool.Result) {
				t.Helper()
				text := outcome(r)
				if strings.Contains(text, "SECRET-d5h") || strings.Contains(text, "PRIVATE KEY") {
					t.Fatalf("%s leaked the secret: %s", what, text)
				}
				if !r.IsError || !strings.Contains(text, "[sandbox: file access denied — reading ") {
					t.Errorf("%s: %s, want the sandbox's read denial", what, text)
				}
			}
			// The /proc magic links are one more way to name it.
			for _, target := range []string{d.key, "keylink", "sshlink/id_rsa", "~/.ssh/id_rsa", "/proc/self/root" + d.key, "/proc/self/root" + d.ws + "/keylink"} {
				if target == "~/.ssh/id_rsa" {
					t.Setenv("HOME", d.home)
				}
				denied("read "+target, run("read", map[string]any{"file_path": target}))
				denied("read_image "+target, run("read_image", map[string]any{"file_path": target}))
				denied("view "+target, run(strreplace.Name, map[string]any{"command": "view", "path": target}))
				denied("grep "+target, run("grep", map[string]any{"pattern": "SECRET", "path": target}))
			}
			// A denied path that does not exist is refused alike: no
			// tool tells what is there.
			for _, missing := range []string{filepath.Join(d.home, ".ssh", "id_ed25519"), "sshlink/nope"} {
				denied("read "+missing, run("read", map[string]any{"file_path": missing}))
				denied("grep "+missing, run("grep", map[string]any{"pattern": "x", "path": missing}))
				denied("glob "+missing, run("glob", map[string]any{"pattern": "*", "path": missing}))
				denied("view "+missing, run(strreplace.Name, map[string]any{"command": "view", "path": missing}))
			}
			for _, dir := range []string{filepath.Join(d.home, ".ssh"), "sshlink"} {
				denied("grep in "+dir, run("grep", map[string]any{"pattern": "SECRET", "path": dir}))
				denied("glob in "+dir, run("glob", map[string]any{"pattern": "**", "path": dir}))
				denied("view of "+dir, run(strreplace.Name, map[string]any{"command": "view", "path": dir}))
			}
			// Inside the workspace: a deny-read entry is neither read nor
			// written (the write fence refuses it first when guards run).
			deniedEdit := func(what string, r tool.Result) {
				t.Helper()
				if text := outcome(r); guards && !strings.Contains(text, "deny-read list") {
					t.Errorf("%s: %s, want a refusal naming the deny-read list", what, text)
				} else if !guards {
					denied(what, r)
				}
			}
			deniedEdit("edit secret.env", run("edit", map[string]any{"file_path": "secret.env", "old_string": "TOKEN", "new_string": "T"}))
			deniedEdit("str_replace secret.env", run(strreplace.Name, map[string]any{"command": "str_replace", "path": "secret.env", "old_str": "TOKEN", "new_str": "T"}))
			deniedEdit("insert secret.env", run(strreplace.Name, map[string]any{"command": "insert", "path": "secret.env", "insert_line": 0, "new_str": "x"}))
			denied("read secret.env", run("read", map[string]any{"file_path": "secret.env"}))
			if b, _ := os.ReadFile(filepath.Join(d.ws, "secret.env")); string(b) != "TOKEN=SECRET-d5h-env\n" {
				t.Fatalf("secret.env changed: %q", b)
			}

			// What lies beside the denied places still reads.
			for _, f := range []string{filepath.Join(d.home, "notes.txt"), filepath.Join(d.home, ".sshx", "config"), "main.go"} {
				if r := run("read", map[string]any{"file_path": f}); r.IsError || !strings.Contains(outcome(r), "plain") {
					t.Errorf("read %s: %s", f, outcome(r))
				}
			}
			// Searches of the parent skip the denied directory and say so.
			for _, c := range []struct {
				name string
				args map[string]any
			}{
				{"grep", map[string]any{"pattern": "SECRET|plain", "path": d.home, "output_mode": "content"}},
				{"glob", map[string]any{"pattern": ".*/*", "path": d.home}},
			} {
				r := run(c.name, c.args)
				text := outcome(r)
				if r.IsError || strings.Contains(text, "SECRET-d5h") || strings.Contains(text, "id_rsa") {
					t.Errorf("%s of HOME: %s", c.name, text)
				}
				if !strings.Contains(text, "plain") && !strings.Contains(text, ".sshx/config") {
					t.Errorf("%s of HOME found nothing: %s", c.name, text)
				}
				if !strings.Contains(text, "[sandbox: skipped what the sandbox denies reading: "+filepath.Join(d.home, ".ssh")) {
					t.Errorf("%s of HOME does not report the denied directory: %s", c.name, text)
				}
			}
			// The workspace search finds its files and follows neither link.
			r := run("grep", map[string]any{"pattern": "SECRET|plain", "output_mode": "content"})
			if text := outcome(r); r.IsError || strings.Contains(text, "SECRET-d5h") || !strings.Contains(text, "plain") {
				t.Errorf("grep of the workspace: %s", text)
			}
		})
	}
}

// TestFileToolsReadRace races the read fence as finding 5 raced the
// write fence: a sandboxed job flips a workspace symlink f between a
// plain file inside and the denied key while read, view and grep read f
// behind the guards. Not one result may hold the key; some reads must
// succeed and some be refused, or the race did not run.
func TestFileToolsReadRace(t *testing.T) {
	calls := map[string]int{"read": 2000, "view": 500, "grep": 500}
	if testing.Short() {
		calls = map[string]int{"read": 200, "view": 50, "grep": 50}
	}
	raceBackends(t, func(t *testing.T, b sandbox.Backend) {
		for _, job := range []string{"shell", "fast"} {
			t.Run(job, func(t *testing.T) {
				d := newDenyRig(t)
				if err := os.WriteFile(filepath.Join(d.ws, "plain.txt"), []byte("plain text\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				p := fileTools(func(*tool.Call) sandbox.Policy { return d.policy }, true)
				if job == "shell" {
					flip(t, b, d.ws, fmt.Sprintf(`ln -sfn plain.txt f; echo ready
while :; do ln -sfn plain.txt f.tmp && mv -T f.tmp f; ln -sfn %q f.tmp && mv -T f.tmp f; done`, d.key))
				} else {
					flipLink(t, b, d.ws, "f", "plain.txt", d.key)
				}
				for _, name := range []string{"read", "view", "grep"} {
					n := calls[name]
					ok, refused, i := 0, 0, 0
					for ; i < n || (ok == 0 || refused == 0) && i < 10*n; i++ {
						var r tool.Result
						switch name {
						case "read":
							r = runTool(p, d.ws, "read", map[string]any{"file_path": "f"})
						case "view":
							r = runTool(p, d.ws, strreplace.Name, map[string]any{"command": "view", "path": "f"})
						default:
							r = runTool(p, d.ws, "grep", map[string]any{"pattern": "SECRET|plain", "path": "f", "output_mode": "content"})
						}
						text := outcome(r)
						if strings.Contains(text, "SECRET-d5h") || strings.Contains(text, "PRIVATE KEY") {
							t.Fatalf("%s call %d under %s/%s returned the key: %s", name, i, b.Name(), job, text)
						}
						if !r.IsError && strings.Contains(text, "plain") {
							ok++
						} else {
							refused++
						}
					}
					t.Logf("%s under %s/%s: %d calls, %d read the plain file, %d refused or empty, 0 leaked", name, b.Name(), job, i, ok, refused)
					if ok == 0 || refused == 0 {
						t.Fatalf("%s: %d read, %d refused: the race did not run", name, ok, refused)
					}
				}
			})
		}
	})
}
