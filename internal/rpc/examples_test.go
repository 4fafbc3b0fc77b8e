package rpc_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/dshtest"
	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

var dshBin string

func TestMain(m *testing.M) { dshtest.Main(m, &dshBin) }

const examples = "../../docs/examples"

// TestDocExamplesMatch keeps docs/rpc.md's code blocks and the example
// files the tests run identical.
func TestDocExamplesMatch(t *testing.T) {
	doc, err := os.ReadFile("../../docs/rpc.md")
	if err != nil {
		t.Fatal(err)
	}
	for lang, file := range map[string]string{"python": "rpc_client.py", "js": "rpc_client.mjs"} {
		re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```")
		m := re.FindSubmatch(doc)
		if m == nil {
			t.Errorf("docs/rpc.md has no %s block", lang)
			continue
		}
		src, err := os.ReadFile(filepath.Join(examples, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m[1], src) {
			t.Errorf("docs/rpc.md's %s block differs from docs/examples/%s", lang, file)
		}
	}
}

// runExample runs an example client against dsh rpc and the fake model.
func runExample(t *testing.T, srv *llmtest.Server, cwd, config string, argv ...string) string {
	t.Helper()
	home := t.TempDir()
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, argv[0], append(argv[1:], cwd, "do the task")...)
	c.Env = append(os.Environ(), "DSH="+dshBin, "DSH_HOME="+home,
		"DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL="+srv.URL())
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", argv[0], err, out.String(), errb.String())
	}
	return out.String()
}

// askBash is a profile whose rule asks before every bash command.
const askBash = `
profile:
  - id: permissions
    module: permissions
    config:
      rules:
        - {tool: bash, action: ask, reason: "commands need a yes"}
`

// TestPythonExample runs the documented standard-library Python client:
// a streamed answer, and an approval it rejects.
func TestPythonExample(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("python3 is not installed: %v", err)
	}
	cwd := t.TempDir()
	outside := filepath.Join(cwd, "out.txt")
	cmd := "echo x > out.txt"
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "bash", Arguments: fmt.Sprintf(`{"command":%q,"description":"write"}`, cmd)}}})
	srv.Enqueue(llmtest.Response{Text: "I could not write it."})
	out := runExample(t, srv, cwd, askBash, py, filepath.Join(examples, "rpc_client.py"))
	for _, want := range []string{
		"[approval] bash " + cmd + ": rejected",
		"I could not write it.\n[completed] 'I could not write it.'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("the rejected command ran")
	}
	// The rejection's feedback reached the model.
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(fmt.Sprint(reqs[1].Messages()), "this script allows nothing") {
		t.Errorf("%d requests; the last does not carry the feedback", len(reqs))
	}
}

// TestNodeExample runs the documented Node client.
func TestNodeExample(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("node is not installed: %v", err)
	}
	srv := llmtest.New()
	defer srv.Close()
	srv.Enqueue(llmtest.Response{Text: "Hello from Node's dsh.", Usage: &llmtest.Usage{Input: 12, Output: 5}})
	out := runExample(t, srv, t.TempDir(), "", node, filepath.Join(examples, "rpc_client.mjs"))
	if want := "Hello from Node's dsh.\n[completed] \"Hello from Node's dsh.\" (tokens in 12, out 5)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
