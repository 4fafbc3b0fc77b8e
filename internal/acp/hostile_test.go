package acp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/acp"
	"github.com/dsh-dev/dsh/internal/jsonrpc"
)

// wireReply is one frame dsh wrote, checked to be a JSON-RPC response.
type wireReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// runRaw runs dsh with args with input as its whole standard input,
// as `printf … | dsh acp` would, and returns the responses it wrote
// (notifications dropped), each checked to be valid JSON-RPC 2.0.
func runRaw(t *testing.T, input []byte, args ...string) []wireReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, dshBin, args...)
	c.Env = append(os.Environ(), "DSH_HOME="+t.TempDir(), "DEEPSEEK_API_KEY=test-key", "DEEPSEEK_BASE_URL=http://127.0.0.1:9")
	c.Stdin = bytes.NewReader(input)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("dsh %v: %v\nstderr:\n%s", args, err, errb.String())
	}
	var replies []wireReply
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r wireReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.JSONRPC != "2.0" {
			t.Fatalf("wrote %q (%v)", sc.Bytes(), err)
		}
		if r.Method != "" {
			continue
		}
		if (r.Error == nil) == (len(r.Result) == 0) || len(r.ID) == 0 {
			t.Fatalf("not a response: %q", sc.Bytes())
		}
		replies = append(replies, r)
	}
	return replies
}

// hostileFrames are frames a broken or hostile client sends, each with
// the id and code dsh must answer it with.
var hostileFrames = []struct {
	frame string
	id    string
	code  int
}{
	{`not json`, "null", jsonrpc.CodeParseError},
	{"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\"\xff", "null", jsonrpc.CodeParseError},
	{strings.Repeat("[", 100000) + strings.Repeat("]", 100000), "null", jsonrpc.CodeParseError},
	{`[{"jsonrpc":"2.0","id":3,"method":"session/new"}]`, "null", jsonrpc.CodeInvalidRequest},
	{`"initialize"`, "null", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":{"a":1},"method":"session/new"}`, "null", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":null,"method":"session/new"}`, "null", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":4,"method":["session/new"]}`, "4", jsonrpc.CodeInvalidRequest},
	{`{"jsonrpc":"2.0","id":5,"method":"session/new","result":{}}`, "5", jsonrpc.CodeInvalidRequest},
	// Over the 16 MiB limit, without its newline until the end.
	{`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"` + strings.Repeat("a", jsonrpc.DefaultMaxLine) + `"}]}}`, "null", jsonrpc.CodeInvalidRequest},
}

// TestHostileFrames: dsh acp, fed malformed frames and then the end of
// its input, answers each with the JSON-RPC error it calls for, answers
// every request it read (initialize included) before it exits 0, and
// ignores a response nobody asked for. Before, a line that was not JSON
// ended the connection, the other frames got no answer (a client waited
// for ever) and the end of the input dropped every answer not yet
// written.
func TestHostileFrames(t *testing.T) {
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
	want := map[string]int{}
	for _, f := range hostileFrames {
		in.WriteString(f.frame + "\n")
		want[f.id+" "+codeKey(f.code)]++
	}
	in.WriteString(`{"jsonrpc":"2.0","id":99,"result":{}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"no/such/notification"}` + "\n")
	replies := runRaw(t, in.Bytes(), "acp")
	got := map[string]int{}
	initialized := false
	for _, r := range replies {
		if string(r.ID) == "1" && r.Error == nil {
			initialized = true
			continue
		}
		if r.Error == nil {
			t.Fatalf("a result for %s", r.ID)
		}
		got[string(r.ID)+" "+codeKey(r.Error.Code)]++
	}
	if !initialized {
		t.Error("initialize was not answered")
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d answers %q, want %d (all: %v)", got[k], k, n, got)
		}
	}
	if len(replies) != len(hostileFrames)+1 {
		t.Errorf("%d answers, want %d", len(replies), len(hostileFrames)+1)
	}
}

func codeKey(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestWrongParamsEveryMethod: params of the wrong JSON type get -32602
// from every method that takes params, and the connection serves on.
func TestWrongParamsEveryMethod(t *testing.T) {
	x := newHarness(t, acp.Options{})
	for _, p := range []string{`[1]`, `"s"`, `7`, `true`} {
		if err := x.call("initialize", json.RawMessage(p), nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("initialize %s: %v", p, err)
		}
	}
	x.init()
	for _, m := range []string{"session/new", "session/load", "session/resume", "session/list", "session/close",
		"session/prompt", "session/set_mode", "session/set_config_option"} {
		for _, p := range []string{`[1]`, `"s"`, `7`, `true`, `{"sessionId":7,"cwd":[]}`} {
			if err := x.call(m, json.RawMessage(p), nil); err == nil || err.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("%s %s: %v", m, p, err)
			}
		}
	}
	x.newSession()
}
