package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Finding 1 (sandbox side): under ConfineReads a command reads only its
// workspace, its writable roots, ReadRoots and the system directories,
// under both backends: not $HOME, not another directory beside the
// workspace, not the host's temp dir in read-only mode; programs and git
// still work.
func TestConfineReadsBothBackends(t *testing.T) {
	requireBash(t)
	git, gitErr := exec.LookPath("git")
	for _, b := range realBackends() {
		for _, mode := range []Mode{ReadOnly, WorkspaceWrite} {
			t.Run(b.Name()+"/"+string(mode), func(t *testing.T) {
				requireWorking(t, b)
				f := newFixture(t)
				h := newSecretHome(t, f.root)
				extra := filepath.Join(f.root, "extra")
				mustMkdir(t, extra)
				mustWrite(t, filepath.Join(extra, "shared.txt"), "extra-readable\n")
				tmpFile := filepath.Join(os.TempDir(), "confine-outside.txt")
				mustWrite(t, tmpFile, "host-tmp\n")
				t.Cleanup(func() { os.Remove(tmpFile) })
				// The workspace is a linked worktree of a clone elsewhere, as
				// a pull request review's is: git needs the clone's git dir.
				clone := filepath.Join(f.root, "clone")
				ws := filepath.Join(f.root, "repo")
				mustMkdir(t, clone)
				mustWrite(t, filepath.Join(clone, "main.go"), "package main\n")
				mustWrite(t, filepath.Join(clone, "clone-only.txt"), "not in the worktree\n")
				if gitErr == nil {
					for _, args := range [][]string{
						{"init", "-q"}, {"add", "main.go"},
						{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first"},
						{"worktree", "add", "-q", "--detach", ws},
					} {
						cmd := exec.Command(git, args...)
						cmd.Dir = clone
						if out, err := cmd.CombinedOutput(); err != nil {
							t.Fatalf("git %v: %v: %s", args, err, out)
						}
					}
				} else {
					mustMkdir(t, ws)
					mustWrite(t, filepath.Join(ws, "main.go"), "package main\n")
				}
				// Landlock cannot let a command create entries at the top
				// of a root holding .git (see Landlock).
				mustMkdir(t, filepath.Join(ws, "sub"))
				p := Policy{Mode: mode, Workspace: ws, ConfineReads: true, ReadRoots: []string{extra}}
				refused := map[string]string{
					"home file":     `cat "$H/.profile"`,
					"home dir":      `ls "$H"`,
					"beside":        `cat "$O/existing"`,
					"secret":        `cat "$H/.ssh/id_rsa"`,
					"dotdot":        `cat ../outside/existing`,
					"proc root":     `cat "/proc/self/root$O/existing"`,
					"planted link":  `ln -sf "$O/existing" l 2>/dev/null; cat "$O/existing"`,
					"find the home": `find "$H" -type f -exec cat {} +`,
					"dsh state":     `cat "$H/.dsh/serve/token"`,
					"clone's files": `cat "$C/clone-only.txt"`,
				}
				if mode == ReadOnly {
					refused["host tmp"] = `cat "$T"`
				}
				for name, script := range refused {
					c, err := b.Confine([]string{"bash", "-c", script}, p)
					if err != nil {
						t.Fatal(err)
					}
					code, out := run(t, c, ws, "H="+h.home, "O="+f.outside, "T="+tmpFile, "C="+clone)
					t.Logf("%s: exit %d: %s", name, code, strings.TrimSpace(out))
					if code == 0 || h.leaked(out) || strings.Contains(out, profileText) || strings.Contains(out, "outside\n") || strings.Contains(out, "host-tmp") || strings.Contains(out, "not in the worktree") {
						t.Errorf("%s: exit %d: %q", name, code, out)
					}
				}
				allowed := map[string]string{
					"system":    `ls /usr/bin >/dev/null && cat /etc/passwd >/dev/null && echo ok`,
					"shell":     `bash -c 'echo hi'`,
					"workspace": `cat main.go`,
					"read root": `cat "$E/shared.txt"`,
					"tmpdir":    `f=$(mktemp) && echo t > "$f" && cat "$f"`,
				}
				if gitErr == nil {
					allowed["git"] = `git log --oneline && git status --short && git show HEAD:main.go`
				}
				if mode == WorkspaceWrite {
					allowed["write"] = `echo new > sub/new.txt && cat sub/new.txt`
				}
				for name, script := range allowed {
					c, err := b.Confine([]string{"bash", "-c", script}, p)
					if err != nil {
						t.Fatal(err)
					}
					code, out := run(t, c, ws, "E="+extra, "HOME="+h.home)
					if code != 0 {
						t.Errorf("%s: exit %d: %q", name, code, out)
					}
				}
			})
		}
	}
}
