package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// protectFixture is a workspace with agent configuration (.dsh with a
// hook script, .claude, .codex) and a script a trusted hook runs
// (scripts/check.sh, named in Policy.Protected).
func protectFixture(t *testing.T) (fixture, Policy) {
	t.Helper()
	f := newFixture(t)
	for _, d := range []string{".dsh", ".claude", ".codex", "scripts", "sub"} {
		mustMkdir(t, filepath.Join(f.ws, d))
	}
	mustWrite(t, filepath.Join(f.ws, ".dsh", "check.sh"), "echo trusted\n")
	mustWrite(t, filepath.Join(f.ws, ".dsh", "hooks.json"), "{}\n")
	mustWrite(t, filepath.Join(f.ws, ".claude", "settings.json"), "{}\n")
	mustWrite(t, filepath.Join(f.ws, ".codex", "config.toml"), "\n")
	mustWrite(t, filepath.Join(f.ws, "scripts", "check.sh"), "echo trusted\n")
	mustWrite(t, filepath.Join(f.ws, "scripts", "other.sh"), "echo other\n")
	return f, Policy{Mode: WorkspaceWrite, Workspace: f.ws, Protected: []string{"scripts/check.sh"}}
}

// Finding 3 (sandbox side): in workspace-write a command cannot rewrite,
// remove or move the repository's agent and hook configuration, nor a
// file a trusted hook runs, under either backend, while the rest of the
// workspace (scripts/other.sh, the directory scripts/ itself) stays
// writable.
func TestProtectedConfigBothBackends(t *testing.T) {
	requireBash(t)
	for _, b := range realBackends() {
		t.Run(b.Name(), func(t *testing.T) {
			requireWorking(t, b)
			f, p := protectFixture(t)
			for name, script := range map[string]string{
				"rewrite hook script":  `echo evil > .dsh/check.sh`,
				"append hooks.json":    `echo evil >> .dsh/hooks.json`,
				"new file in .dsh":     `echo evil > .dsh/new.sh`,
				"remove .claude":       `rm -rf .claude`,
				"move .codex":          `mv .codex y`,
				"replace .dsh":         `mv .dsh old && mkdir .dsh && echo evil > .dsh/check.sh`,
				"rewrite protected":    `echo evil > scripts/check.sh`,
				"remove protected":     `rm -f scripts/check.sh`,
				"move protected":       `mv scripts/check.sh scripts/moved`,
				"move its directory":   `mv scripts s2 && mkdir scripts && echo evil > scripts/check.sh`,
				"sed in place":         `sed -i s/trusted/evil/ scripts/check.sh`,
				"hard link and write":  `ln scripts/check.sh sub/hl && echo evil > sub/hl`,
				"symlink swap of .dsh": `rm -rf .dsh; ln -s sub .dsh`,
			} {
				c, err := b.Confine([]string{"bash", "-c", script}, p)
				if err != nil {
					t.Fatal(err)
				}
				code, out := run(t, c, f.ws)
				t.Logf("%s: exit %d: %s", name, code, strings.TrimSpace(out))
				if code == 0 {
					t.Errorf("%s: the command succeeded", name)
				} else if !c.Denied(code, []byte(out)) {
					t.Errorf("%s: exit %d %q is not recognised as a sandbox denial", name, code, out)
				}
			}
			for file, want := range map[string]string{
				".dsh/check.sh": "echo trusted\n", ".dsh/hooks.json": "{}\n", ".claude/settings.json": "{}\n",
				".codex/config.toml": "\n", "scripts/check.sh": "echo trusted\n",
			} {
				b, err := os.ReadFile(filepath.Join(f.ws, file))
				if err != nil || string(b) != want {
					t.Errorf("%s is now %q (%v)", file, b, err)
				}
			}
			if fi, err := os.Lstat(filepath.Join(f.ws, ".dsh")); err != nil || !fi.IsDir() {
				t.Errorf(".dsh was replaced: %v", err)
			}
			rest := `echo ok > scripts/other.sh && cat .dsh/check.sh`
			if b.Name() == "bwrap" {
				// Landlock carves scripts/ (on the way to a protected
				// file), so nothing new can be created in it.
				rest += ` && echo new > scripts/new.sh`
			}
			c, err := b.Confine([]string{"bash", "-c", rest}, p)
			if err != nil {
				t.Fatal(err)
			}
			if code, out := run(t, c, f.ws); code != 0 || !strings.Contains(out, "trusted") {
				t.Errorf("the rest of the workspace: exit %d: %q", code, out)
			}
		})
	}
}

// The file tools' fence refuses the same writes by name, including in a
// configuration directory that does not exist yet and through a
// symlinked .dsh.
func TestCheckWriteProtectedConfig(t *testing.T) {
	f, p := protectFixture(t)
	bare := filepath.Join(f.root, "bare")
	mustMkdir(t, filepath.Join(bare, "real"))
	if err := os.Symlink("real", filepath.Join(bare, ".claude")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    Policy
		path string
	}{
		{p, ".dsh/hooks.json"},
		{p, filepath.Join(f.ws, ".dsh", "check.sh")},
		{p, ".claude/settings.json"},
		{p, ".codex/config.toml"},
		{p, ".dsh"},
		{p, "scripts/check.sh"},
		{p, "sub/../scripts/check.sh"},
		{Policy{Mode: WorkspaceWrite, Workspace: bare}, ".dsh/check.sh"},         // missing .dsh
		{Policy{Mode: WorkspaceWrite, Workspace: bare}, ".codex/config.toml"},    // missing .codex
		{Policy{Mode: WorkspaceWrite, Workspace: bare}, "real/settings.json"},    // .claude's target
		{Policy{Mode: WorkspaceWrite, Workspace: bare}, ".claude/settings.json"}, // through the link
	} {
		err := c.p.CheckWrite(c.path)
		if !errors.Is(err, ErrDenied) {
			t.Errorf("CheckWrite(%s) in %s = %v, want a denial", c.path, c.p.Workspace, err)
		}
	}
	// A session in $HOME cannot plant ~/.ssh/authorized_keys with a file
	// tool: what may not be read may not be written.
	home := filepath.Join(f.root, "home")
	mustMkdir(t, filepath.Join(home, ".ssh"))
	inHome := Policy{Mode: WorkspaceWrite, Workspace: home, DenyRead: DefaultDenyRead(home, filepath.Join(home, ".dsh"))}
	for _, path := range []string{".ssh/authorized_keys", ".dsh/config.yaml", ".netrc"} {
		if err := inHome.CheckWrite(path); !errors.Is(err, ErrDenied) {
			t.Errorf("CheckWrite(~/%s) = %v, want a denial", path, err)
		}
	}
	if err := inHome.CheckWrite(".profile"); err != nil {
		t.Errorf("CheckWrite(~/.profile): %v", err)
	}
	for _, ok := range []string{"scripts/other.sh", "scripts/new.sh", "dsh/x", ".dshrc", "sub/.dsh"} {
		if err := p.CheckWrite(ok); err != nil {
			t.Errorf("CheckWrite(%s): %v", ok, err)
		}
	}
}
