// Command dsh-fakellm serves a scripted fake model (Chat Completions,
// Anthropic Messages and the OpenAI Responses API) on loopback, for manual
// testing and benchmarks of dsh and of external agents without a real
// provider. The wire format follows the endpoint each request uses, so one
// server speaks all three.
//
//	dsh-fakellm [-addr 127.0.0.1:0] [-script file.json]
//	            [-loop-tool bash -loop-args '{"command":"true"}' -loop-steps N]
//	            [-codex-home DIR [-codex-model fake-model]]
//
// With -codex-home, DIR/config.toml is written once the server listens so
// that the Codex CLI run with CODEX_HOME=DIR (and the dummy key variable
// LLMTEST_CODEX_API_KEY set to anything) uses this server; see
// llmtest.WriteCodexConfig.
//
// The script is a JSON array of llmtest.Response objects, answered in
// order. With -loop-tool, requests beyond the script get N calls of that
// tool and then a final text, per conversation. It prints
// "listening on <url>" to stdout, logs one line per request to stderr and
// exits cleanly on SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "dsh-fakellm:", err)
		os.Exit(2)
	}
}

// run serves until ctx ends; it is main without the process globals, so
// that tests can drive it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dsh-fakellm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free one)")
	script := fs.String("script", "", "JSON file holding an array of scripted responses")
	loopTool := fs.String("loop-tool", "", "after the script, answer calls of this tool")
	loopArgs := fs.String("loop-args", "{}", "JSON arguments of the -loop-tool calls")
	loopSteps := fs.Int("loop-steps", 1, "tool calls per conversation before the final text")
	codexHome := fs.String("codex-home", "", "write a Codex config.toml pointing at this server into this directory")
	codexModel := fs.String("codex-model", "fake-model", "model slug for the -codex-home config")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *loopTool != "" && (!json.Valid([]byte(*loopArgs)) || *loopSteps < 0) {
		return errors.New("-loop-args must be JSON and -loop-steps not negative")
	}
	var rs []llmtest.Response
	if *script != "" {
		f, err := os.Open(*script)
		if err != nil {
			return err
		}
		rs, err = llmtest.ParseScript(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *script, err)
		}
	}

	srv, err := llmtest.Start(*addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	if *codexHome != "" {
		if err := llmtest.WriteCodexConfig(*codexHome, srv.URL(), *codexModel); err != nil {
			return err
		}
	}
	srv.Enqueue(rs...)
	if *loopTool != "" {
		srv.SetFallback(llmtest.LoopFallback(*loopTool, *loopArgs, *loopSteps))
	}
	var mu sync.Mutex // requests are logged from concurrent handlers
	srv.SetOnRequest(func(r llmtest.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "%s %s format=%s stream=%t model=%q messages=%d input=%d tools=%d tool-results=%d bytes=%d\n",
			r.Method, r.Path, r.Format, r.Stream, r.Model(), len(r.Messages()), len(r.Input()), len(r.ToolNames()),
			r.ToolResultCount(), len(r.Body))
	})
	fmt.Fprintf(stdout, "listening on %s\n", srv.URL())
	<-ctx.Done()
	return nil
}
