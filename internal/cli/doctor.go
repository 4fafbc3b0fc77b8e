package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

// check is one line of dsh doctor.
type check struct {
	name, status, detail, fix string
}

// doctorCmd lists every optional integration as found or missing, with
// the reason and the fix, so a user knows what dsh can do on this machine.
func doctorCmd(_ context.Context, args []string, stdio IO) int {
	if len(args) != 0 {
		fmt.Fprintln(stdio.Stderr, "usage: dsh doctor")
		return ExitUsage
	}
	var checks []check
	add := func(c check) { checks = append(checks, c) }

	home, err := config.Home()
	if err != nil {
		add(check{"state directory", "missing", err.Error(), "set DSH_HOME"})
	} else {
		add(check{"state directory", "ok", home, ""})
	}
	_, cfg, comp, err := app.Compose(app.Options{})
	if err != nil {
		add(check{"configuration", "error", err.Error(), "fix the named row or file"})
	} else {
		add(check{"configuration", "ok", "profile composes", ""})
	}
	for _, p := range provider.NewCatalog(cfg, nil).Providers() {
		switch {
		case p.APIKeyEnv == "":
			add(check{"provider " + p.ID, "ok", "needs no key (" + p.BaseURL + ")", ""})
		case os.Getenv(p.APIKeyEnv) != "":
			add(check{"provider " + p.ID, "ok", p.APIKeyEnv + " is set", ""})
		default:
			add(check{"provider " + p.ID, "missing", p.APIKeyEnv + " is not set", "export " + p.APIKeyEnv + "=…"})
		}
	}
	for _, b := range []sandbox.Backend{sandbox.NewBwrap(""), sandbox.NewLandlock("")} {
		if err := b.Probe(); err != nil {
			fix := "apt-get install bubblewrap (or allow unprivileged user namespaces)"
			if b.Name() == "landlock" {
				fix = "a Linux kernel with Landlock enabled (lsm=landlock)"
			}
			add(check{"sandbox " + b.Name(), "missing", firstLine(err.Error()), fix})
		} else {
			add(check{"sandbox " + b.Name(), "ok", "confines commands", ""})
		}
	}
	if b, err := sandbox.Default().Backend(); err != nil {
		add(check{"sandbox", "unavailable", "commands outside full-access fail with SANDBOX_UNAVAILABLE", "install bubblewrap, or run with --permission full-access knowingly"})
	} else {
		add(check{"sandbox", "ok", "using " + b.Name(), ""})
	}
	for _, tool := range []struct{ bin, what, fix string }{
		{"rg", "grep uses ripgrep", "apt-get install ripgrep (grep falls back to its Go walker)"},
		{"git", "repositories and worktrees", "apt-get install git"},
	} {
		if path, err := exec.LookPath(tool.bin); err == nil {
			add(check{tool.bin, "ok", tool.what + " (" + path + ")", ""})
		} else {
			add(check{tool.bin, "missing", tool.what, tool.fix})
		}
	}
	if comp != nil {
		if path, err := app.CodexStatus(comp); err != nil {
			add(check{"codex", "missing", "subagent_codex and dsh delegate codex: " + firstLine(err.Error()), "npm install -g @openai/codex, or set command in the codex row"})
		} else {
			add(check{"codex", "ok", "subagent_codex and dsh delegate codex (" + path + ")", ""})
		}
	}
	if comp != nil {
		if path, err := app.ClaudeStatus(comp); err != nil {
			add(check{"claude", "missing", "subagent_claude: " + firstLine(err.Error()), "npm install -g @anthropic-ai/claude-code, or set command in the claude-code row"})
		} else {
			add(check{"claude", "ok", "subagent_claude (" + path + ")", ""})
		}
		for _, st := range app.ACPAgentStatus(comp) {
			if st.Err != nil {
				add(check{st.Name, "missing", "ACP subagent: " + st.Err.Error(), "install the agent or fix command in its acp-agent row"})
			} else {
				add(check{st.Name, "ok", "ACP subagent (" + st.Path + ")", ""})
			}
		}
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL\tFIX")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.name, c.status, c.detail, c.fix)
	}
	_ = tw.Flush()
	return ExitOK
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
