package cli_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// unixListener accepts connections on path until the test ends and
// counts them.
func unixListener(t *testing.T, path string) *atomic.Int32 {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return &n
}

// Host UNIX sockets are refused through the bash tool in read-only and
// workspace-write (under whichever backend the machine selects; CI runs
// this with DSH_SANDBOX_BACKENDS=landlock too): a socket outside the
// workspace is refused and the result says so, one in the workspace and
// one the profile allows are reached, and the model is told which.
func TestWorkspaceWriteRefusesHostSockets(t *testing.T) {
	needSandbox(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	for _, preset := range []string{"workspace-write", "read-only"} {
		t.Run(preset, func(t *testing.T) {
			e := newEnv(t)
			e.cwd = outsideDir(t)
			out, agent := outsideDir(t), outsideDir(t)
			hostSock, agentSock, wsSock := filepath.Join(out, "docker.sock"), filepath.Join(agent, "agent.sock"), filepath.Join(e.cwd, "dev.sock")
			host, allowed, inside := unixListener(t, hostSock), unixListener(t, agentSock), unixListener(t, wsSock)
			writeFile(t, filepath.Join(e.home, "config.yaml"), fmt.Sprintf(`
profile:
  - id: permissions
    module: permissions
    config:
      unix_sockets: [%s]
`, agentSock), 0o600)
			client := func(path string) llmtest.ToolCall {
				return bashCall(py + ` -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("connected")' ` + path)
			}
			e.srv.Enqueue(
				llmtest.Response{ToolCalls: []llmtest.ToolCall{client(hostSock), client(agentSock), client("dev.sock")}},
				llmtest.Response{Text: "done"},
			)
			stdout, stderr, code := e.dsh("", "run", "--json", "--approval", "never", "--permission", preset, "try the sockets")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if order := os.Getenv("DSH_SANDBOX_BACKENDS"); order != "" {
				if first, _, _ := strings.Cut(order, ","); !strings.Contains(stdout, `"backend":"`+first+`"`) {
					t.Errorf("the run did not use the %s backend", first)
				}
			}
			events, _ := parseJSONRun(t, stdout)
			res := results(t, events)
			if len(res) != 3 {
				t.Fatalf("%d results", len(res))
			}
			if host.Load() != 0 || strings.Contains(text(res[0]), "connected") ||
				!strings.Contains(text(res[0]), "[sandbox: socket access denied — connecting to the UNIX socket "+hostSock) {
				t.Errorf("host socket reached (%d connections) or not reported: %q", host.Load(), text(res[0]))
			}
			for i, n := range []*atomic.Int32{allowed, inside} {
				if n.Load() != 1 || !strings.Contains(text(res[i+1]), "connected") {
					t.Errorf("result %d: %d connections, %q", i+1, n.Load(), text(res[i+1]))
				}
			}
			body := string(e.srv.Requests()[0].Body)
			if !strings.Contains(body, "Connecting to a UNIX socket outside") || !strings.Contains(body, "except "+agentSock) {
				t.Error("the runtime context does not say which sockets are reachable")
			}
		})
	}
}

// A profile's allowed sockets must be clean absolute paths.
func TestUnixSocketsConfigValidated(t *testing.T) {
	for _, bad := range []string{"agent.sock", "/run/../run/agent.sock", `""`} {
		e := newEnv(t)
		writeFile(t, filepath.Join(e.home, "config.yaml"), "profile:\n  - id: permissions\n    module: permissions\n    config: {unix_sockets: ["+bad+"]}\n", 0o600)
		_, stderr, code := e.dsh("", "config", "dump")
		if code != 2 || !strings.Contains(stderr, "unix_sockets: allowed UNIX socket") {
			t.Errorf("%s: exit %d, %s", bad, code, stderr)
		}
	}
}
