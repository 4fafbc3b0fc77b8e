package cli

import (
	"context"
	"errors"
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

// check is one line of dsh doctor. Its status is "ok", "missing" (an
// optional integration that is not installed) or "error" (something dsh
// needs, or that the configuration asks for, is broken).
type check struct {
	name, status, detail, fix string
}

// doctorCmd lists what dsh needs and every optional integration as found,
// missing or broken, with the reason and the fix, so a user knows what
// dsh can do on this machine. It exits 1 when anything is broken.
func doctorCmd(ctx context.Context, args []string, stdio IO) int {
	if len(args) != 0 {
		fmt.Fprintln(stdio.Stderr, "usage: dsh doctor")
		return ExitUsage
	}
	var checks []check
	add := func(c check) { checks = append(checks, c) }

	home, err := config.Home()
	if err != nil {
		add(check{"state directory", "error", err.Error(), "set DSH_HOME"})
	} else if st, err := os.Stat(home); err == nil && !st.IsDir() {
		add(check{"state directory", "error", home + " is not a directory", "remove it or set DSH_HOME"})
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		add(check{"state directory", "error", err.Error(), "fix its permissions or set DSH_HOME"})
	} else {
		add(check{"state directory", "ok", home, ""})
	}
	_, cfg, comp, err := app.Compose(app.Options{})
	if err != nil {
		add(check{"configuration", "error", err.Error(), "fix the named key or row"})
	} else {
		add(check{"configuration", "ok", "profile composes", ""})
	}
	catalog := provider.NewCatalog(cfg, nil)
	model := app.DefaultModel(comp)
	if _, err := catalog.Resolve(model, app.UserAgent()); err != nil {
		fix := "set model in config.yaml, or pass --model"
		var mc *provider.MissingCredentialError
		if errors.As(err, &mc) {
			fix = "export " + mc.Env + "=…"
		}
		add(check{"default model", "error", model + ": " + err.Error(), fix})
	} else {
		add(check{"default model", "ok", model, ""})
	}
	for _, p := range catalog.Providers() {
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
		add(check{"sandbox", "error", "no backend can confine commands: commands outside full-access fail with SANDBOX_UNAVAILABLE", "install bubblewrap, or run with --permission full-access knowingly"})
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
				// A configured agent that cannot start is broken, not optional.
				add(check{st.Name, "error", "ACP subagent: " + st.Err.Error(), "install the agent or fix command in its acp-agent row"})
			} else {
				add(check{st.Name, "ok", "ACP subagent (" + st.Path + ")", ""})
			}
		}
	}
	if comp != nil {
		lspServers := app.LSPStatus(comp)
		if len(lspServers) == 0 {
			add(check{"lsp", "missing", "no language server configured: the lsp tool is off", "go install golang.org/x/tools/gopls@v0.23.0, or add servers to the tool.lsp row"})
		}
		for _, st := range lspServers {
			switch {
			case st.Err != nil:
				// A configured server that cannot start is broken.
				add(check{"lsp " + st.Ext, "error", st.Command + ": " + firstLine(st.Err.Error()), "install it or fix its command in the tool.lsp row"})
			case st.Default:
				add(check{"lsp " + st.Ext, "ok", st.Command + " (" + st.Path + ", the default)", ""})
			default:
				add(check{"lsp " + st.Ext, "ok", st.Command + " (" + st.Path + ")", ""})
			}
		}
	}
	if comp != nil {
		if cfgs, err := app.MCPServers(comp); err != nil {
			add(check{"mcp servers", "error", err.Error(), "fix the mcp_servers entries"})
		} else if len(cfgs) > 0 {
			checks = append(checks, mcpDoctorChecks(ctx, cfgs)...)
		}
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL\tFIX")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.name, c.status, c.detail, c.fix)
	}
	_ = tw.Flush()
	var broken []string
	for _, c := range checks {
		if c.status == "error" {
			broken = append(broken, c.name)
		}
	}
	if len(broken) > 0 {
		fmt.Fprintf(stdio.Stderr, "dsh doctor: broken: %s\n", strings.Join(broken, ", "))
		return ExitFailed
	}
	return ExitOK
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
