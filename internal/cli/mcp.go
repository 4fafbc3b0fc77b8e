package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/mcp"
)

// mcpCmd runs "dsh mcp": the configured MCP servers, for inspection and
// debugging.
func mcpCmd(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Stderr, usage())
		return ExitUsage
	}
	switch args[0] {
	case "list", "ls":
		return mcpList(ctx, args[1:], stdio)
	case "call":
		return mcpCall(ctx, args[1:], stdio)
	}
	fmt.Fprintf(stdio.Stderr, "dsh mcp: unknown subcommand %q\n", args[0])
	return ExitUsage
}

// mcpConfigs composes the profile and returns its MCP servers.
func mcpConfigs(patches []string) ([]mcp.ServerConfig, error) {
	_, _, comp, err := app.Compose(app.Options{Patches: patches})
	if err != nil {
		return nil, err
	}
	return app.MCPServers(comp)
}

// startMCP starts cfgs from the current directory; warnings are
// collected rather than printed, since the states say the same.
func startMCP(ctx context.Context, cfgs []mcp.ServerConfig) (*mcp.Manager, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return mcp.Start(ctx, cfgs, mcp.Options{Dir: dir, Warn: func(string) {}, ClientVersion: app.Version})
}

// probeMCP starts every configured server once (a required one failing
// does not stop the others: this is for reporting) and returns their
// statuses; the servers are stopped before it returns.
func probeMCP(ctx context.Context, cfgs []mcp.ServerConfig) ([]mcp.Status, error) {
	probe := make([]mcp.ServerConfig, len(cfgs))
	for i, c := range cfgs {
		c.Required = false
		probe[i] = c
	}
	m, err := startMCP(ctx, probe)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	st := m.Status()
	for i := range st {
		st[i].Required = cfgs[i].Required
	}
	return st, nil
}

func mcpList(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("mcp list", stdio)
	asJSON := fs.Bool("json", false, "print the servers as a JSON array")
	var patches patchFlags
	fs.Var(&patches, "patch", "apply this profile patch file after config.yaml (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 0 {
		fmt.Fprintln(stdio.Stderr, "usage: dsh mcp list [--json]")
		return ExitUsage
	}
	cfgs, err := mcpConfigs(patches)
	if err != nil {
		return fail(stdio, err)
	}
	st, err := probeMCP(ctx, cfgs)
	if err != nil {
		return fail(stdio, err)
	}
	if *asJSON {
		if st == nil {
			st = []mcp.Status{}
		}
		return writeJSON(stdio, st)
	}
	if len(st) == 0 {
		fmt.Fprintln(stdio.Stderr, "no MCP servers are configured (add mcp_servers to config.yaml; see dsh help mcp)")
		return ExitOK
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTRANSPORT\tSTATE\tTOOLS\tAPPROVAL\tSOURCE\tLAST ERROR")
	for _, s := range st {
		tools := fmt.Sprint(len(s.Tools))
		if s.Resources {
			tools += "+resources"
		}
		if s.Prompts {
			tools += "+prompts"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Transport, s.State, tools, s.Approval, s.Source, firstLine(s.LastError))
	}
	_ = tw.Flush()
	return ExitOK
}

func mcpCall(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("mcp call", stdio)
	asJSON := fs.Bool("json", false, "print the server's whole result as JSON")
	var patches patchFlags
	fs.Var(&patches, "patch", "apply this profile patch file after config.yaml (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) < 2 || len(pos) > 3 {
		fmt.Fprintln(stdio.Stderr, "usage: dsh mcp call SERVER TOOL [JSON]")
		return ExitUsage
	}
	argsJSON := json.RawMessage("{}")
	if len(pos) == 3 {
		var obj map[string]any
		if err := json.Unmarshal([]byte(pos[2]), &obj); err != nil || obj == nil {
			fmt.Fprintln(stdio.Stderr, "dsh mcp call: the arguments must be a JSON object")
			return ExitUsage
		}
		argsJSON = json.RawMessage(pos[2])
	}
	cfgs, err := mcpConfigs(patches)
	if err != nil {
		return fail(stdio, err)
	}
	var cfg *mcp.ServerConfig
	for i := range cfgs {
		if cfgs[i].Name == pos[0] {
			cfg = &cfgs[i]
		}
	}
	if cfg == nil {
		fmt.Fprintf(stdio.Stderr, "dsh mcp call: no MCP server %q is configured\n", pos[0])
		return ExitUsage
	}
	one := *cfg
	one.Required, one.Disabled = true, false
	m, err := startMCP(ctx, []mcp.ServerConfig{one})
	if err != nil {
		return fail(stdio, err)
	}
	defer m.Close()
	s, _ := m.Server(one.Name)
	res, err := s.CallTool(ctx, pos[1], argsJSON)
	if err != nil {
		fmt.Fprintln(stdio.Stderr, "dsh:", err)
		return ExitFailed
	}
	if *asJSON {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		printContent(stdio, res)
	}
	for _, t := range s.Tools() {
		if t.Raw == pos[1] {
			if err := t.CheckStructured(res); err != nil {
				fmt.Fprintln(stdio.Stderr, "dsh:", err)
				if mcp.CodeOf(err) == mcp.CodeSchema {
					return ExitFailed
				}
			}
		}
	}
	if res.IsError {
		fmt.Fprintf(stdio.Stderr, "dsh: %s: the tool reported an error\n", mcp.CodeToolError)
		return ExitFailed
	}
	return ExitOK
}

// printContent prints a result's content as text: text as is, other
// kinds as one descriptive line each.
func printContent(stdio IO, res *sdk.CallToolResult) {
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			fmt.Fprintln(stdio.Stdout, c.Text)
		case *sdk.ImageContent:
			fmt.Fprintf(stdio.Stdout, "[image %s, %d bytes]\n", c.MIMEType, len(c.Data))
		case *sdk.AudioContent:
			fmt.Fprintf(stdio.Stdout, "[audio %s, %d bytes]\n", c.MIMEType, len(c.Data))
		case *sdk.ResourceLink:
			fmt.Fprintf(stdio.Stdout, "[resource link %s %s]\n", c.Name, c.URI)
		case *sdk.EmbeddedResource:
			if c.Resource != nil {
				fmt.Fprintf(stdio.Stdout, "[resource %s]\n%s\n", c.Resource.URI, c.Resource.Text)
			}
		}
	}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		fmt.Fprintf(stdio.Stdout, "structured: %s\n", b)
	}
}

// mcpDoctorChecks starts every configured server and reports each as a
// doctor line: connected with its tool count, disabled, or broken.
func mcpDoctorChecks(ctx context.Context, cfgs []mcp.ServerConfig) []check {
	st, err := probeMCP(ctx, cfgs)
	if err != nil {
		return []check{{"mcp servers", "error", err.Error(), "fix the mcp_servers entries"}}
	}
	var out []check
	for _, s := range st {
		name := "mcp " + s.Name
		switch s.State {
		case mcp.StateConnected:
			out = append(out, check{name, "ok", fmt.Sprintf("%s, %d tools, approval %s", s.Transport, len(s.Tools), s.Approval), ""})
		case mcp.StateDisabled:
			out = append(out, check{name, "ok", "disabled", ""})
		default:
			out = append(out, check{name, "error", firstLine(s.LastError), "fix command/url in " + s.Source + ", or set disabled: true"})
		}
	}
	return out
}

// mcpPrompt renders the MCP prompt spec "SERVER:PROMPT[:JSON]" (JSON: an
// object of string arguments) with the session's servers and returns the
// text of its messages, followed by text (the command line's prompt)
// when that is not empty. It serves dsh run --mcp-prompt; an empty spec
// returns text as it is.
func mcpPrompt(ctx context.Context, lookup func(name string) (*mcp.Server, bool), spec, text string) (string, error) {
	if spec == "" {
		return text, nil
	}
	server, rest, ok := strings.Cut(spec, ":")
	name, rawArgs, _ := strings.Cut(rest, ":")
	if !ok || server == "" || name == "" {
		return "", &app.ConfigError{Err: fmt.Errorf("--mcp-prompt %q: want SERVER:PROMPT or SERVER:PROMPT:{\"arg\":\"value\"}", spec)}
	}
	var args map[string]string
	if rawArgs != "" {
		if err := json.Unmarshal([]byte(rawArgs), &args); err != nil {
			return "", &app.ConfigError{Err: fmt.Errorf("--mcp-prompt arguments must be a JSON object of strings: %w", err)}
		}
	}
	s, ok := lookup(server)
	if !ok {
		return "", &app.ConfigError{Err: fmt.Errorf("--mcp-prompt: no MCP server %q is configured", server)}
	}
	res, err := s.GetPrompt(ctx, name, args)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, msg := range res.Messages {
		switch c := msg.Content.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			}
		case *sdk.ResourceLink:
			parts = append(parts, "Resource: "+c.URI)
		default:
			return "", fmt.Errorf("--mcp-prompt %s: message content %T cannot be sent as text", spec, c)
		}
	}
	if strings.TrimSpace(text) != "" {
		parts = append(parts, text)
	}
	if len(parts) == 0 {
		return "", errors.New("--mcp-prompt " + spec + ": the prompt rendered no text")
	}
	return strings.Join(parts, "\n\n"), nil
}
