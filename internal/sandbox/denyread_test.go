package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// secretHome is a fake $HOME with credentials where DefaultDenyRead
// looks for them, a $DSH_HOME inside it, and a harmless file beside them.
type secretHome struct {
	home, dshHome string
}

const (
	sshSecret   = "SSH-PRIVATE-KEY-SECRET"
	dbSecret    = "DSH-DB-SECRET"
	tokenSecret = "SERVE-TOKEN-SECRET"
	netrcSecret = "NETRC-SECRET"
	profileText = "profile-is-readable"
)

func newSecretHome(t *testing.T, root string) secretHome {
	t.Helper()
	h := secretHome{home: filepath.Join(root, "home")}
	h.dshHome = filepath.Join(h.home, ".dsh")
	mustMkdir(t, filepath.Join(h.home, ".ssh"))
	mustMkdir(t, filepath.Join(h.dshHome, "serve"))
	mustWrite(t, filepath.Join(h.home, ".ssh", "id_rsa"), sshSecret+"\n")
	mustWrite(t, filepath.Join(h.dshHome, "dsh.db"), dbSecret+"\n")
	mustWrite(t, filepath.Join(h.dshHome, "serve", "token"), tokenSecret+"\n")
	mustWrite(t, filepath.Join(h.home, ".netrc"), netrcSecret+"\n")
	mustWrite(t, filepath.Join(h.home, ".profile"), profileText+"\n")
	return h
}

func (h secretHome) leaked(out string) bool {
	for _, s := range []string{sshSecret, dbSecret, tokenSecret, netrcSecret} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// Finding 6: a confined command cannot read what DenyRead names, under
// both backends and in both confined modes, by any path to it (direct,
// "..", a symlink planted in the workspace, /proc/self/root, a hard link,
// a new mount namespace), and a denial is "Permission denied", never an
// empty file; the file next to the secrets stays readable.
func TestDenyReadBothBackends(t *testing.T) {
	requireBash(t)
	for _, b := range realBackends() {
		for _, mode := range []Mode{ReadOnly, WorkspaceWrite} {
			t.Run(b.Name()+"/"+string(mode), func(t *testing.T) {
				requireWorking(t, b)
				f := newFixture(t)
				h := newSecretHome(t, f.root)
				// Planted before the command, as a hostile repository would
				// ship it.
				if err := os.Symlink(filepath.Join(h.home, ".ssh", "id_rsa"), filepath.Join(f.ws, "key-link")); err != nil {
					t.Fatal(err)
				}
				p := Policy{Mode: mode, Workspace: f.ws, DenyRead: DefaultDenyRead(h.home, h.dshHome)}
				rel, err := filepath.Rel(f.ws, filepath.Join(h.home, ".ssh", "id_rsa"))
				if err != nil {
					t.Fatal(err)
				}
				denied := map[string]string{
					"cat key":         `cat "$H/.ssh/id_rsa"`,
					"ls ssh dir":      `ls "$H/.ssh"`,
					"cd ssh dir":      `cd "$H/.ssh" && cat id_rsa`,
					"cat db":          `cat "$H/.dsh/dsh.db"`,
					"cat token":       `cat "$H/.dsh/serve/token"`,
					"cat netrc":       `cat "$H/.netrc"`,
					"dotdot":          `cat ` + rel,
					"symlink":         `cat key-link`,
					"proc root":       `cat "/proc/self/root$H/.ssh/id_rsa"`,
					"proc cwd":        `cd "$H" && cat /proc/self/cwd/.netrc`,
					"head bytes":      `head -c 100 "$H/.dsh/dsh.db"`,
					"grep recursive":  `grep -r SECRET "$H/.ssh" "$H/.dsh"`,
					"dd":              `dd if="$H/.netrc" bs=1 count=64`,
					"redirect":        `while read l; do echo "$l"; done < "$H/.netrc"`,
					"mount namespace": `unshare -Urm sh -c 'umount "$H/.ssh" 2>/dev/null; umount "$H/.netrc" 2>/dev/null; cat "$H/.ssh/id_rsa" "$H/.netrc"'`,
				}
				// A non-recursive bind of a parent would show what the deny
				// mounts cover, were the kernel not to refuse it for mounts
				// locked into a less privileged namespace.
				denied["bind parent"] = `unshare -Urm sh -c 'mount --bind "$H" "$PWD" && cat "$PWD/.ssh/id_rsa" "$PWD/.netrc"'`
				if _, err := exec.LookPath("python3"); err == nil {
					// O_PATH needs no right; reopening through /proc must.
					denied["O_PATH reopen"] = `python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_PATH); print(open("/proc/self/fd/%d" % fd).read())' "$H/.netrc"`
				}
				if mode == WorkspaceWrite {
					denied["hard link"] = `ln "$H/.ssh/id_rsa" hl && cat hl`
					denied["new symlink"] = `ln -sf "$H/.dsh/dsh.db" db-link && cat db-link`
					denied["copy"] = `cp "$H/.netrc" stolen && cat stolen`
				}
				for name, script := range denied {
					c, err := b.Confine([]string{"bash", "-c", script}, p)
					if err != nil {
						t.Fatal(err)
					}
					code, out := run(t, c, f.ws, "H="+h.home)
					t.Logf("%s: exit %d: %s", name, code, strings.TrimSpace(out))
					if h.leaked(out) {
						t.Errorf("%s: a secret leaked: %q", name, out)
					}
					if code == 0 {
						t.Errorf("%s: the command succeeded (an empty file is no denial): %q", name, out)
					}
					if name != "mount namespace" && name != "bind parent" && name != "grep recursive" && !c.Denied(code, []byte(out)) {
						t.Errorf("%s: exit %d %q is not recognised as a sandbox denial", name, code, out)
					}
				}
				for name, script := range map[string]string{
					"profile":        `cat "$H/.profile"`,
					"workspace":      `cat README`,
					"system":         `ls /usr/bin >/dev/null && echo ok`,
					"shell":          `bash -c 'echo hi'`,
					"ssh dir exists": `test -e "$H/.ssh" && echo exists`,
				} {
					c, err := b.Confine([]string{"bash", "-c", script}, p)
					if err != nil {
						t.Fatal(err)
					}
					if code, out := run(t, c, f.ws, "H="+h.home); code != 0 || h.leaked(out) {
						t.Errorf("%s: exit %d: %q", name, code, out)
					}
				}
				if b.Name() == "landlock" && !f.outsideTemp && mode == WorkspaceWrite {
					t.Log("the fake home lies in a temp dir, which Landlock grants whole in workspace-write")
				}
			})
		}
	}
}

// The most specific entry wins: a workspace inside a denied directory (a
// review worktree under $DSH_HOME) is readable and, in workspace-write,
// writable, while its siblings are not; a denied directory inside the
// workspace (a session started in $HOME) stays denied, for writes too.
func TestDenyReadNesting(t *testing.T) {
	requireBash(t)
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			root, _ := testRoot(t)
			h := newSecretHome(t, root)
			deny := DefaultDenyRead(h.home, h.dshHome)

			// A worktree inside $DSH_HOME.
			wt := filepath.Join(h.dshHome, "worktrees", "pr-1")
			mustMkdir(t, wt)
			mustWrite(t, filepath.Join(wt, "main.go"), "package main\n")
			for _, mode := range []Mode{ReadOnly, WorkspaceWrite} {
				script := `cat main.go && ! cat "$D/dsh.db" && ! ls "$D"`
				if mode == WorkspaceWrite {
					script += ` && echo new > new.txt && cat new.txt`
				}
				c, err := b.Confine([]string{"bash", "-c", script}, Policy{Mode: mode, Workspace: wt, DenyRead: deny})
				if err != nil {
					t.Fatal(err)
				}
				code, out := run(t, c, wt, "D="+h.dshHome)
				if code != 0 || h.leaked(out) || !strings.Contains(out, "package main") {
					t.Errorf("%s: worktree in $DSH_HOME: exit %d: %q", mode, code, out)
				}
			}

			// A session whose workspace is $HOME itself.
			c, err := b.Confine([]string{"bash", "-c", `cat .profile; cat .ssh/id_rsa; cat .dsh/dsh.db; echo x > .ssh/planted; rm -rf .ssh; ls .ssh`},
				Policy{Mode: WorkspaceWrite, Workspace: h.home, DenyRead: deny})
			if err != nil {
				t.Fatal(err)
			}
			code, out := run(t, c, h.home)
			if h.leaked(out) || !strings.Contains(out, profileText) || code == 0 {
				t.Errorf("workspace $HOME: exit %d: %q", code, out)
			}
			if _, err := os.Stat(filepath.Join(h.home, ".ssh", "id_rsa")); err != nil {
				t.Errorf("the command removed a denied file: %v", err)
			}
			if _, err := os.Stat(filepath.Join(h.home, ".ssh", "planted")); err == nil {
				t.Error("the command wrote into a denied directory")
			}
		})
	}
}

// CheckRead follows the same rule as the backends.
func TestCheckReadDenyAndConfine(t *testing.T) {
	root, _ := testRoot(t)
	h := newSecretHome(t, root)
	ws := filepath.Join(root, "ws")
	mustMkdir(t, ws)
	if err := os.Symlink(filepath.Join(h.home, ".ssh", "id_rsa"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(h.dshHome, "wt")
	mustMkdir(t, wt)
	p := Policy{Mode: ReadOnly, Workspace: ws, DenyRead: DefaultDenyRead(h.home, h.dshHome)}
	for _, path := range []string{
		filepath.Join(h.home, ".ssh", "id_rsa"), filepath.Join(h.home, ".ssh"), "link",
		filepath.Join(ws, "..", "home", ".dsh", "dsh.db"), filepath.Join(h.home, ".netrc"),
	} {
		if err := p.CheckRead(path); err == nil {
			t.Errorf("CheckRead(%s) allowed", path)
		}
	}
	if err := p.CheckRead(filepath.Join(h.home, ".profile")); err != nil {
		t.Errorf("~/.profile: %v", err)
	}
	inWT := p
	inWT.Workspace = wt
	if err := inWT.CheckRead(filepath.Join(wt, "x")); err != nil {
		t.Errorf("a workspace inside $DSH_HOME: %v", err)
	}
	if err := inWT.CheckRead(filepath.Join(h.dshHome, "dsh.db")); err == nil {
		t.Error("$DSH_HOME/dsh.db allowed beside a workspace inside it")
	}
	conf := p
	conf.ConfineReads = true
	if err := conf.CheckRead(filepath.Join(h.home, ".profile")); err == nil {
		t.Error("ConfineReads allowed ~/.profile")
	}
	for _, ok := range []string{"/usr/bin", filepath.Join(ws, "README")} {
		if err := conf.CheckRead(ok); err != nil {
			t.Errorf("ConfineReads: %s: %v", ok, err)
		}
	}
	full := p
	full.Mode = DangerFullAccess
	if err := full.CheckRead(filepath.Join(h.home, ".ssh", "id_rsa")); err != nil {
		t.Errorf("danger-full-access: %v", err)
	}
}

// With the real $HOME and the default deny-read list, everyday tools
// still work in workspace-write: git reads ~/.gitconfig, go builds with
// its caches in ~/.cache (a writable root, as dsh's default profile
// makes it).
func TestDenyReadDefaultsKeepToolsWorking(t *testing.T) {
	requireBash(t)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skip("no cache directory")
	}
	goBin, goErr := exec.LookPath("go")
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			f := newFixture(t)
			mustMkdir(t, filepath.Join(f.ws, "hello"))
			mustWrite(t, filepath.Join(f.ws, "hello", "go.mod"), "module hello\n\ngo 1.21\n")
			mustWrite(t, filepath.Join(f.ws, "hello", "main.go"), "package main\n\nfunc main() { println(\"built\") }\n")
			p := Policy{Mode: WorkspaceWrite, Workspace: f.ws, WritableRoots: []string{cache},
				DenyRead: DefaultDenyRead(home, filepath.Join(home, ".dsh"))}
			script := `git --version && git config --global --list >/dev/null 2>&1; git -C hello init -q && git -C hello status --short >/dev/null && echo git-ok`
			if goErr == nil {
				script += ` && cd hello && "$GOBIN_PATH" run . 2>&1`
			}
			c, err := b.Confine([]string{"bash", "-c", script}, p)
			if err != nil {
				t.Fatal(err)
			}
			code, out := run(t, c, f.ws, "GOBIN_PATH="+goBin, "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
			if code != 0 || !strings.Contains(out, "git-ok") || (goErr == nil && !strings.Contains(out, "built")) {
				t.Fatalf("exit %d: %s", code, out)
			}
		})
	}
}

// Run as root, the host's own secrets can be denied too: /etc/shadow is
// refused while /etc/passwd beside it stays readable.
func TestDenyReadSystemSecrets(t *testing.T) {
	requireBash(t)
	if os.Geteuid() != 0 {
		t.Skip("only root can read the host's secrets anyway")
	}
	if _, err := os.Stat("/etc/shadow"); err != nil {
		t.Skip("no /etc/shadow here")
	}
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			f := newFixture(t)
			for _, mode := range []Mode{ReadOnly, WorkspaceWrite} {
				p := Policy{Mode: mode, Workspace: f.ws, DenyRead: SystemSecrets()}
				c, err := b.Confine([]string{"bash", "-c", `cat /etc/passwd >/dev/null && echo passwd-ok; cat /etc/shadow`}, p)
				if err != nil {
					t.Fatal(err)
				}
				code, out := run(t, c, f.ws)
				if code == 0 || !strings.Contains(out, "passwd-ok") || !strings.Contains(out, "Permission denied") || strings.Contains(out, "root:") {
					t.Errorf("%s: exit %d: %q", mode, code, out)
				}
			}
		})
	}
}
