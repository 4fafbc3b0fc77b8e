package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/hooks"
	"github.com/dsh-dev/dsh/internal/workspace"
)

// hooksCmd runs "dsh hooks": list the effective user hooks, trust a
// project's hooks file, or run the hooks of one event on a sample payload.
func hooksCmd(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Stderr, usage())
		return ExitUsage
	}
	switch args[0] {
	case "list", "ls":
		return hooksList(args[1:], stdio)
	case "trust":
		return hooksTrust(args[1:], stdio)
	case "test":
		return hooksTest(ctx, args[1:], stdio)
	}
	fmt.Fprintf(stdio.Stderr, "dsh hooks: unknown subcommand %q\n", args[0])
	return ExitUsage
}

// hooksEnv loads the configuration (for hooks.import) and resolves the
// directory whose hooks apply.
func hooksEnv(stdio IO, cwd string) (home string, imports []string, dir string, code int) {
	home, cfg, _, err := app.Compose(app.Options{})
	if err != nil {
		return "", nil, "", fail(stdio, err)
	}
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return "", nil, "", fail(stdio, err)
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return "", nil, "", fail(stdio, err)
	}
	return home, cfg.Hooks.Import, cwd, ExitOK
}

func hooksList(args []string, stdio IO) int {
	fs := newFlags("hooks list", stdio)
	cwd := fs.String("cwd", "", "session directory whose hooks to list (default: the current directory)")
	asJSON := fs.Bool("json", false, "print the hooks as a JSON array")
	if rest, err := parseInterspersed(fs, args); err != nil || len(rest) > 0 {
		return ExitUsage
	}
	home, imports, dir, code := hooksEnv(stdio, *cwd)
	if code != ExitOK {
		return code
	}
	set, err := hooks.Load(hooks.LoadOptions{Home: home, ProjectDir: workspace.ProjectRoot(dir), Import: imports, Cwd: dir})
	if err != nil {
		return fail(stdio, err)
	}
	for _, w := range set.Warnings {
		fmt.Fprintf(stdio.Stderr, "dsh: %s\n", w)
	}
	if *asJSON {
		type row struct {
			Event   hooks.Event `json:"event"`
			Matcher string      `json:"matcher"`
			Command string      `json:"command"`
			Timeout float64     `json:"timeoutSeconds"`
			Source  string      `json:"source"`
		}
		rows := []row{}
		for _, h := range set.Hooks {
			rows = append(rows, row{h.Event, h.Matcher, h.Command, h.Timeout.Seconds(), h.Source})
		}
		return writeJSON(stdio, rows)
	}
	if len(set.Hooks) == 0 {
		fmt.Fprintln(stdio.Stdout, "no hooks")
		return ExitOK
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT\tMATCHER\tCOMMAND\tTIMEOUT\tSOURCE")
	for _, h := range set.Hooks {
		m := h.Matcher
		if m == "" {
			m = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.Event, m, h.Command, h.Timeout, h.Source)
	}
	_ = tw.Flush()
	return ExitOK
}

func hooksTrust(args []string, stdio IO) int {
	fs := newFlags("hooks trust", stdio)
	rest, err := parseInterspersed(fs, args)
	if err != nil || len(rest) > 1 {
		return ExitUsage
	}
	cwd := ""
	if len(rest) == 1 {
		cwd = rest[0]
	}
	home, imports, dir, code := hooksEnv(stdio, cwd)
	if code != ExitOK {
		return code
	}
	files := hooks.ProjectFiles(workspace.ProjectRoot(dir), imports)
	if len(files) == 0 {
		fmt.Fprintf(stdio.Stderr, "dsh hooks trust: no project hooks file under %s (want .dsh/hooks.json)\n", workspace.ProjectRoot(dir))
		return ExitUsage
	}
	t, err := hooks.LoadTrust(home)
	if err != nil {
		return fail(stdio, err)
	}
	// Trust covers the scripts the hooks run from the repository too:
	// each is listed, so the user sees what they vouched for.
	for _, f := range files {
		tr, err := t.Add(f, workspace.ProjectRoot(dir), dir)
		if err != nil {
			return fail(stdio, err)
		}
		fmt.Fprintf(stdio.Stdout, "trusted %s (sha256 %s)\n", f, tr.Digest[:12])
		for _, r := range tr.Refs {
			fmt.Fprintf(stdio.Stdout, "  and %s (sha256 %s), which its hooks run\n", r.Path, r.Digest[:12])
		}
	}
	return ExitOK
}

func hooksTest(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("hooks test", stdio)
	cwd := fs.String("cwd", "", "session directory whose hooks to run (default: the current directory)")
	toolName := fs.String("tool", "", "tool name of a tool event (and the matcher subject)")
	input := fs.String("input", "{}", "tool_input of a tool event, as JSON")
	match := fs.String("match", "", "matcher subject of a non-tool event (source, trigger, notification type)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(rest) != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh hooks test: want one EVENT")
		return ExitUsage
	}
	ev, err := hooks.ParseEvent(rest[0])
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "dsh hooks test: %v\n", err)
		return ExitUsage
	}
	if !json.Valid([]byte(*input)) {
		fmt.Fprintf(stdio.Stderr, "dsh hooks test: --input is not valid JSON: %s\n", *input)
		return ExitUsage
	}
	home, imports, dir, code := hooksEnv(stdio, *cwd)
	if code != ExitOK {
		return code
	}
	set, err := hooks.Load(hooks.LoadOptions{Home: home, ProjectDir: workspace.ProjectRoot(dir), Import: imports, Cwd: dir})
	if err != nil {
		return fail(stdio, err)
	}
	for _, w := range set.Warnings {
		fmt.Fprintf(stdio.Stderr, "dsh: %s\n", w)
	}
	fields := hooks.SampleFields(ev, *toolName, json.RawMessage(*input))
	subject := *match
	if *toolName != "" {
		subject = *toolName
	}
	r := &hooks.Runner{Set: set, SessionID: "hooks-test", Cwd: dir, PermissionMode: func() string { return "default" }}
	out := r.Fire(ctx, ev, subject, fields)
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMAND\tEXIT\tDURATION\tDECISION\tNOTE")
	for _, res := range out.Results {
		note := res.Reason
		if res.Error != "" {
			note = res.Error
		}
		dec := res.Decision
		if dec == "" {
			dec = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%dms\t%s\t%s\n", res.Command, res.ExitCode, res.DurationMs, dec, note)
	}
	_ = tw.Flush()
	dec := out.Decision
	if dec == "" {
		dec = "none"
	}
	fmt.Fprintf(stdio.Stdout, "%d hook(s) ran; decision: %s", out.Ran, dec)
	if out.Reason != "" {
		fmt.Fprintf(stdio.Stdout, " (%s)", out.Reason)
	}
	fmt.Fprintln(stdio.Stdout)
	for _, c := range out.Context {
		fmt.Fprintf(stdio.Stdout, "context: %s\n", c)
	}
	if out.Stop {
		fmt.Fprintf(stdio.Stdout, "continue: false (%s)\n", out.StopReason)
	}
	return ExitOK
}

// writeJSON prints v as indented JSON.
func writeJSON(stdio IO, v any) int {
	enc := json.NewEncoder(stdio.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(stdio, err)
	}
	return ExitOK
}
