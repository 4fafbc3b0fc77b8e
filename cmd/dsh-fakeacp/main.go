// Command dsh-fakeacp is a tiny fake ACP (Agent Client Protocol) agent for
// end-to-end tests. It speaks JSON-RPC 2.0 as newline-delimited JSON on
// stdin/stdout and implements just what internal/subagent/acpclient uses:
//
//   - initialize → {"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}
//   - session/new → {"sessionId":"fake-1"}; with -cwd-file the request's
//     "cwd" is written to that file first
//   - session/prompt → two session/update agent_message_chunk notifications
//     whose texts concatenate to the reply, then {"stopReason":"end_turn"}
//   - session/cancel (notification) → the pending prompt, if any, is
//     answered {"stopReason":"cancelled"}
//
// The reply is -reply, or "echo: <prompt text>" when the prompt text
// contains the word ECHO. With -wait the agent sends the first chunk and
// then holds the prompt until session/cancel arrives.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
