package permission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// recorder is a terminal's output: it records writes and reports each on
// a channel, so tests can wait for a prompt instead of sleeping.
type recorder struct {
	mu     sync.Mutex
	buf    strings.Builder
	writes chan string
}

func newRecorder() *recorder { return &recorder{writes: make(chan string, 64)} }

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.buf.Write(p)
	r.mu.Unlock()
	r.writes <- string(p)
	return len(p), nil
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// waitFor returns once a write containing s arrived.
func (r *recorder) waitFor(t *testing.T, s string) {
	t.Helper()
	for w := range r.writes {
		if strings.Contains(w, s) {
			return
		}
	}
}

// sequence ids for deterministic approval ids.
func seqIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("ap-%d", n)
	}
}

func decided(t *testing.T, l *session.Log) []ApprovalDecided {
	t.Helper()
	var out []ApprovalDecided
	for _, e := range l.Events() {
		if e.Type == session.TypeApprovalDecided {
			var d ApprovalDecided
			if err := e.Decode(&d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

func asked(t *testing.T, l *session.Log) []ApprovalAsked {
	t.Helper()
	var out []ApprovalAsked
	for _, e := range l.Events() {
		if e.Type == session.TypeApprovalAsked {
			var a ApprovalAsked
			if err := e.Decode(&a); err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
	}
	return out
}

func bashReq(callID, command, reason string) tool.ApprovalRequest {
	args, _ := json.Marshal(map[string]any{"command": command, "workdir": "sub"})
	return tool.ApprovalRequest{CallID: callID, ToolName: "bash", Arguments: args, Reason: reason, Cwd: "/work/proj"}
}

func fixedState(st State) func() State { return func() State { return st } }

var wsAsk = State{PresetWorkspaceWrite, sandbox.WorkspaceWrite, ApprovalAsk}

func TestServiceTerminal(t *testing.T) {
	tests := []struct {
		name   string
		answer string // written to the terminal; "EOF" closes it
		want   tool.ApprovalOutcome
	}{
		{"yes", "y\n", tool.AllowedOnce},
		{"YES", " Yes \n", tool.AllowedOnce},
		{"no", "n\n", tool.Rejected},
		{"anything else", "sure\n", tool.Rejected},
		{"empty line", "\n", tool.Rejected},
		{"end of input", "EOF", tool.Cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog(t, "/work/proj")
			pr, pw := io.Pipe()
			out := newRecorder()
			s := &Service{Log: l, State: fixedState(wsAsk), Human: NewTerminal(pr, out), NewID: seqIDs()}
			done := make(chan tool.ApprovalOutcome)
			go func() {
				o, err := s.Approve(context.Background(), bashReq("call-1", "git push origin main", "needs the network"))
				if err != nil {
					t.Error(err)
				}
				done <- o
			}()
			out.waitFor(t, "Allow once?")
			if tt.answer == "EOF" {
				pw.Close()
			} else if _, err := io.WriteString(pw, tt.answer); err != nil {
				t.Fatal(err)
			}
			if got := <-done; got != tt.want {
				t.Fatalf("outcome %s, want %s", got, tt.want)
			}
			shown := out.String()
			for _, w := range []string{"Approval needed for bash", "command: git push origin main", "cwd:     /work/proj/sub", "reason:  needs the network"} {
				if !strings.Contains(shown, w) {
					t.Fatalf("prompt lacks %q:\n%s", w, shown)
				}
			}
			a, d := asked(t, l), decided(t, l)
			if len(a) != 1 || a[0] != (ApprovalAsked{ID: "ap-1", ToolName: "bash", CallID: "call-1", Reason: "needs the network", Command: "git push origin main", Cwd: "/work/proj/sub"}) {
				t.Fatalf("asked %+v", a)
			}
			if len(d) != 1 || d[0].ID != "ap-1" || d[0].Outcome != tt.want || d[0].Answerer != AnswererTerminal {
				t.Fatalf("decided %+v", d)
			}
		})
	}
}

func TestServiceWithoutAnswer(t *testing.T) {
	human := &scripted{name: "human", verdicts: []Verdict{{Outcome: tool.AllowedOnce}}}
	tests := []struct {
		name         string
		state        State
		human        Answerer
		wantAnswerer string
	}{
		{"policy never", State{PresetCustom, sandbox.WorkspaceWrite, ApprovalNever}, human, AnswererPolicy},
		{"full access", State{PresetFullAccess, sandbox.DangerFullAccess, ApprovalNever}, human, AnswererPolicy},
		{"no answerer", wsAsk, nil, AnswererNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog(t, "/")
			s := &Service{Log: l, State: fixedState(tt.state), Human: tt.human}
			o, err := s.Approve(context.Background(), bashReq("c", "ls", "why"))
			if err != nil || o != tool.Unavailable {
				t.Fatalf("got %s, %v", o, err)
			}
			d := decided(t, l)
			if len(d) != 1 || d[0].Outcome != tool.Unavailable || d[0].Answerer != tt.wantAnswerer || d[0].ID != asked(t, l)[0].ID || d[0].ID == "" {
				t.Fatalf("decided %+v", d)
			}
		})
	}
	if human.calls != 0 {
		t.Fatal("the human was asked under policy never")
	}
}

// scripted is an answerer returning canned verdicts.
type scripted struct {
	name     string
	mu       sync.Mutex
	verdicts []Verdict
	err      error
	calls    int
	last     Question
}

func (s *scripted) Name() string { return s.name }

func (s *scripted) Answer(ctx context.Context, q Question) (Verdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.last = q
	if s.err != nil {
		return Verdict{}, s.err
	}
	v := s.verdicts[0]
	s.verdicts = s.verdicts[1:]
	return v, nil
}

func TestServiceAnswererFailures(t *testing.T) {
	tests := []struct {
		name   string
		a      *scripted
		want   tool.ApprovalOutcome
		reason string
	}{
		{"error is unavailable", &scripted{name: "h", err: errors.New("socket closed")}, tool.Unavailable, "socket closed"},
		{"garbage outcome is rejected", &scripted{name: "h", verdicts: []Verdict{{Outcome: "always"}}}, tool.Rejected, "invalid answer always"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLog(t, "/")
			s := &Service{Log: l, State: fixedState(wsAsk), Human: tt.a}
			o, err := s.Approve(context.Background(), tool.ApprovalRequest{CallID: "c", ToolName: "write", Arguments: json.RawMessage(`{"file_path":"x"}`)})
			if err != nil || o != tt.want {
				t.Fatalf("got %s, %v", o, err)
			}
			if d := decided(t, l); d[0].Reason != tt.reason || d[0].Answerer != "h" {
				t.Fatalf("decided %+v", d)
			}
			if a := asked(t, l); a[0].Command != "" || a[0].ToolName != "write" {
				t.Fatalf("asked %+v", a)
			}
		})
	}
}

// readSignal reports each Read call on its input, so a test knows the
// terminal has started reading for a question.
type readSignal struct {
	r     io.Reader
	reads chan struct{}
}

func (r *readSignal) Read(p []byte) (int, error) {
	select {
	case r.reads <- struct{}{}:
	default:
	}
	return r.r.Read(p)
}

func TestTerminalCancel(t *testing.T) {
	l := newLog(t, "/")
	pr, pw := io.Pipe()
	defer pw.Close()
	out := newRecorder()
	in := &readSignal{r: pr, reads: make(chan struct{}, 1)}
	s := &Service{Log: l, State: fixedState(wsAsk), Human: NewTerminal(in, out)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		o, err := s.Approve(ctx, bashReq("c1", "rm -rf build", "clean"))
		if o != tool.Cancelled {
			t.Errorf("outcome %s", o)
		}
		done <- err
	}()
	out.waitFor(t, "Allow once?")
	<-in.reads // the read for this question is under way
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if d := decided(t, l); len(d) != 1 || d[0].Outcome != tool.Cancelled {
		t.Fatalf("decided %+v", d)
	}
	// A "y" typed for the cancelled question must not approve the next.
	next := make(chan tool.ApprovalOutcome)
	go func() {
		o, _ := s.Approve(context.Background(), bashReq("c2", "rm -rf /", "oops"))
		next <- o
	}()
	out.waitFor(t, "rm -rf /")
	if _, err := io.WriteString(pw, "y\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "ignored: that answer was for a cancelled request")
	if _, err := io.WriteString(pw, "n\n"); err != nil {
		t.Fatal(err)
	}
	if o := <-next; o != tool.Rejected {
		t.Fatalf("second ask: %s", o)
	}
}

func TestTerminalSerialisesAsks(t *testing.T) {
	l := newLog(t, "/")
	pr, pw := io.Pipe()
	defer pw.Close()
	out := newRecorder()
	s := &Service{Log: l, State: fixedState(wsAsk), Human: NewTerminal(pr, out)}
	var wg sync.WaitGroup
	outcomes := make(chan tool.ApprovalOutcome, 2)
	for _, cmd := range []string{"make one", "make two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, _ := s.Approve(context.Background(), bashReq(cmd, cmd, ""))
			outcomes <- o
		}()
	}
	// Each answer is consumed before the next prompt is shown: with the
	// asks serialised, prompt and answer strictly alternate.
	for _, ans := range []string{"y\n", "n\n"} {
		out.waitFor(t, "Allow once?")
		if _, err := io.WriteString(pw, ans); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(outcomes)
	got := map[tool.ApprovalOutcome]int{}
	for o := range outcomes {
		got[o]++
	}
	if got[tool.AllowedOnce] != 1 || got[tool.Rejected] != 1 {
		t.Fatalf("outcomes %v", got)
	}
	if n := strings.Count(out.String(), "Allow once?"); n != 2 {
		t.Fatalf("%d prompts:\n%s", n, out.String())
	}
}

func TestPromptSanitised(t *testing.T) {
	q := Question{ToolName: "bash", Command: "echo hi\x1b[2K\rrm -rf ~\u202e", Cwd: "/w", Reason: "line1\nline2"}
	got := renderQuestion(q)
	if strings.ContainsAny(got, "\x1b\r\u202e") || !strings.Contains(got, `\u001b[2K\u000drm -rf ~\u202e`) {
		t.Fatalf("not sanitised: %q", got)
	}
	if !strings.Contains(got, "reason:  line1\n           line2") {
		t.Fatalf("multi-line reason not indented: %q", got)
	}
	q = Question{ToolName: "write", Arguments: json.RawMessage(`{"file_path":"/etc/x","content":"` + strings.Repeat("a", 3000) + `"}`), Cwd: "/w"}
	if got := renderQuestion(q); !strings.Contains(got, `arguments: {"file_path":"/etc/x"`) || len(got) > 2200 {
		t.Fatalf("arguments not shown or not bounded (%d bytes)", len(got))
	}
}

func TestTerminalPromptsAfterRepeatedCancels(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	out := newRecorder()
	in := &readSignal{r: pr, reads: make(chan struct{}, 1)}
	term := NewTerminal(in, out)
	ask := func(ctx context.Context, cmd string) chan Verdict {
		ch := make(chan Verdict, 1)
		go func() {
			v, _ := term.Answer(ctx, Question{ToolName: "bash", Command: cmd, Cwd: "/"})
			ch <- v
		}()
		out.waitFor(t, cmd)
		return ch
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	first := ask(ctx1, "first")
	<-in.reads // the reader is blocked reading for the first question
	cancel1()
	ctx2, cancel2 := context.WithCancel(context.Background())
	second := ask(ctx2, "second") // its request waits behind the stale read
	cancel2()
	third := ask(context.Background(), "third") // still prompted at once
	for _, ch := range []chan Verdict{first, second} {
		if v := <-ch; v.Outcome != tool.Cancelled {
			t.Fatalf("cancelled ask got %+v", v)
		}
	}
	if _, err := io.WriteString(pw, "y\n"); err != nil { // typed for the first prompt
		t.Fatal(err)
	}
	out.waitFor(t, "ignored")
	if _, err := io.WriteString(pw, "n\n"); err != nil {
		t.Fatal(err)
	}
	if v := <-third; v.Outcome != tool.Rejected {
		t.Fatalf("third ask got %+v", v)
	}
}
