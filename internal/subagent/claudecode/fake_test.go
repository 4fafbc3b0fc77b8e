package claudecode_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// The test binary doubles as a fake Claude Code (-p, stream-json in and
// out) when fakeEnv is set; its value is a comma-separated list of
// behaviours:
//
//	ok           init, a tool_use/tool_result pair, a failed tool, text,
//	             a success result echoing the prompt; exits 0 on stdin EOF
//	error        init, then an error_max_turns result
//	apierror     init, then a success result with is_error (an API error)
//	exit         init, some text, stderr, exit 3 without a result
//	noinit       stderr and exit 2 before any output
//	resumefail   a result before any init (an unknown --resume), exit 1
//	hang         init, print the pid to fakeFifo, block ignoring stdin
//	grandchild   start "sleep" in the group and print its pid to fakeFifo
//	interrupt    init, then wait for the interrupt control request and
//	             answer with an error_during_execution result
//	malformed    garbage and unknown lines around an ok run
//	structured   the result carries structured_output {"name":"bob"}
//	badstruct    the result carries structured_output {"name":5}
//	maxtokens    the success result has stop_reason max_tokens
//
// When fakeRecord is set, the fake writes its argv, environment and cwd
// there as JSON before anything else.
const (
	fakeEnv    = "CLAUDECODE_FAKE"
	fakeFifo   = "CLAUDECODE_FIFO"
	fakeRecord = "CLAUDECODE_RECORD"
)

// fakeSession is the session id the fake announces when not resuming.
const fakeSession = "5e2a3c1d-0000-4000-8000-000000000001"

// record is what the fake saw.
type record struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
}

func report(line string) {
	f, err := os.OpenFile(os.Getenv(fakeFifo), os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fifo:", err)
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

func emit(v any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func fakeClaude(modes []string) int {
	has := func(m string) bool { return slices.Contains(modes, m) }
	args := os.Args[1:]
	if path := os.Getenv(fakeRecord); path != "" {
		cwd, _ := os.Getwd()
		b, _ := json.Marshal(record{Args: args, Env: os.Environ(), Cwd: cwd})
		if err := os.WriteFile(path, b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "record:", err)
			return 9
		}
	}
	sid := fakeSession
	if i := slices.Index(args, "--resume"); i >= 0 && i+1 < len(args) {
		sid = args[i+1]
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	waitEOF := func() {
		for in.Scan() {
		}
	}
	if has("noinit") {
		fmt.Fprintln(os.Stderr, "fatal: cannot start")
		return 2
	}
	// The prompt: one stream-json user message.
	prompt := ""
	if in.Scan() {
		var m struct {
			Type    string `json:"type"`
			Message struct {
				Role    string `json:"role"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal(in.Bytes(), &m); err != nil || m.Type != "user" || m.Message.Role != "user" {
			fmt.Fprintf(os.Stderr, "bad prompt line %q\n", in.Text())
			return 4
		}
		for _, c := range m.Message.Content {
			prompt += c.Text
		}
	}
	if has("resumefail") {
		emit(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "num_turns": 0,
			"session_id": "99999999-0000-4000-8000-000000000000", "errors": []string{"No conversation found with session ID: " + sid}})
		fmt.Fprintln(os.Stderr, "No conversation found with session ID: "+sid)
		return 1
	}
	if has("malformed") {
		fmt.Println("this is not json")
		fmt.Println(`{"type":"assistant","message":`)
		fmt.Println(`[1,2,3]`)
		fmt.Println(``)
		emit(map[string]any{"type": "stream_event", "event": map[string]any{"type": "message_start"}})
		emit(map[string]any{"type": "system", "subtype": "hook_started", "session_id": sid})
	}
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": sid, "model": "fake-model",
		"permissionMode": "default", "cwd": "/somewhere", "tools": []string{"Bash", "Read"}})
	if has("grandchild") {
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 5
		}
		report(fmt.Sprint(c.Process.Pid))
	}
	if has("hang") {
		report(fmt.Sprint(os.Getpid()))
		select {}
	}
	assistant := func(blocks ...map[string]any) {
		emit(map[string]any{"type": "assistant", "session_id": sid, "parent_tool_use_id": nil,
			"message": map[string]any{"role": "assistant", "content": blocks}})
	}
	switch {
	case has("exit"):
		assistant(map[string]any{"type": "text", "text": "partial work"})
		fmt.Fprintln(os.Stderr, "fatal: boom")
		return 3
	case has("interrupt"):
		assistant(map[string]any{"type": "text", "text": "working on it"})
		for in.Scan() {
			var c struct {
				Type      string `json:"type"`
				RequestID string `json:"request_id"`
				Request   struct {
					Subtype string `json:"subtype"`
				} `json:"request"`
			}
			if json.Unmarshal(in.Bytes(), &c) == nil && c.Type == "control_request" && c.Request.Subtype == "interrupt" {
				emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": c.RequestID}})
				emit(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true, "session_id": sid,
					"num_turns": 1, "errors": []string{"interrupted by control request"}})
				break
			}
		}
		waitEOF()
		return 1
	case has("error"):
		emit(map[string]any{"type": "result", "subtype": "error_max_turns", "is_error": true, "session_id": sid,
			"num_turns": 9, "total_cost_usd": 0.5, "errors": []string{"Reached maximum number of turns (9)"},
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 2}})
		waitEOF()
		return 0
	case has("apierror"):
		emit(map[string]any{"type": "result", "subtype": "success", "is_error": true, "session_id": sid,
			"result": "API Error: 500 upstream exploded", "api_error_status": 500, "num_turns": 1})
		waitEOF()
		return 0
	}
	assistant(map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "echo hi\necho there"}})
	emit(map[string]any{"type": "user", "session_id": sid, "message": map[string]any{"role": "user", "content": []map[string]any{
		{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi\nthere", "is_error": false}}}})
	assistant(map[string]any{"type": "tool_use", "id": "toolu_2", "name": "Read", "input": map[string]any{"file_path": "/nope"}})
	emit(map[string]any{"type": "user", "session_id": sid, "message": map[string]any{"role": "user", "content": []map[string]any{
		{"type": "tool_result", "tool_use_id": "toolu_2", "content": []map[string]any{{"type": "text", "text": "File does not exist."}}, "is_error": true}}}})
	if has("malformed") {
		fmt.Println("{still not json")
	}
	answer := "answer to: " + prompt
	assistant(map[string]any{"type": "thinking", "thinking": "hmm"}, map[string]any{"type": "text", "text": answer})
	result := map[string]any{"type": "result", "subtype": "success", "is_error": false, "session_id": sid,
		"result": answer, "stop_reason": "end_turn", "num_turns": 2, "total_cost_usd": 0.0125,
		"usage":              map[string]any{"input_tokens": 2000, "output_tokens": 100, "cache_read_input_tokens": 30, "cache_creation_input_tokens": 40},
		"permission_denials": []map[string]any{{"tool_name": "Bash", "tool_use_id": "toolu_9", "tool_input": map[string]any{"command": "touch /outside"}}}}
	switch {
	case has("structured"):
		result["structured_output"] = map[string]any{"name": "bob"}
		result["result"] = `{"name":"bob"}`
	case has("badstruct"):
		result["structured_output"] = map[string]any{"name": 5}
	case has("maxtokens"):
		result["stop_reason"] = "max_tokens"
	}
	emit(result)
	waitEOF()
	return 0
}

func fakeMain() (int, bool) {
	mode, ok := os.LookupEnv(fakeEnv)
	if !ok {
		return 0, false
	}
	return fakeClaude(strings.Split(mode, ",")), true
}
