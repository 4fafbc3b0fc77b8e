package permission

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/dsh-dev/dsh/internal/tool"
)

// maxShownArgs bounds the arguments a prompt shows for a non-bash call.
const maxShownArgs = 2000

// Terminal asks a human on a terminal: it shows the exact command, its
// directory and the reason, and reads one line. "y" or "yes" allows the
// call once; for a bash command, "a" or "always" allows it and grants the
// same exact command for the rest of the session (see SessionGrant);
// anything else denies it; end of input or a cancelled ctx cancels.
// Concurrent asks are put one at a time.
//
// Input is read only while an ask waits for it, so nothing typed between
// asks can answer a later one; a line that arrives for an ask that was
// cancelled meanwhile is dropped, and the terminal says so. The reader
// goroutine, started on the first ask, lives as long as the Terminal.
type Terminal struct {
	out  io.Writer
	outM sync.Mutex // serialises writes from asks and the reader
	in   *bufio.Reader
	sem  chan struct{}
	reqs chan *readReq
	once sync.Once
}

// readReq is one line wanted by an ask.
type readReq struct {
	reply     chan readResult // buffered: the reader never blocks on it
	abandoned atomic.Bool
}

type readResult struct {
	line string
	err  error
}

// NewTerminal returns a terminal answerer reading answers from in and
// writing prompts to out (the CLI passes /dev/tty for both, so that
// piped stdin or redirected stdout cannot answer or hide a prompt).
func NewTerminal(in io.Reader, out io.Writer) *Terminal {
	// reqs holds one request, so an ask never waits for the reader to
	// finish the read of a cancelled question before showing its prompt.
	return &Terminal{out: out, in: bufio.NewReader(in), sem: make(chan struct{}, 1), reqs: make(chan *readReq, 1)}
}

// Name implements Answerer.
func (t *Terminal) Name() string { return AnswererTerminal }

// Answer implements Answerer.
func (t *Terminal) Answer(ctx context.Context, q Question) (Verdict, error) {
	cancelled := Verdict{Outcome: tool.Cancelled, Reason: "the question was cancelled"}
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return cancelled, nil
	}
	defer func() { <-t.sem }()
	t.once.Do(func() { go t.readLoop() })

	// The read is requested before the prompt is shown, so that a reader
	// still busy with a cancelled question picks this one up next. Asks
	// are serialised, so a request still buffered now belongs to a
	// cancelled ask: drop it, which leaves room for this one.
	req := &readReq{reply: make(chan readResult, 1)}
	select {
	case <-t.reqs:
	default:
	}
	t.reqs <- req
	t.write(renderQuestion(q))
	select {
	case r := <-req.reply:
		if r.err != nil {
			t.write("\n(no answer: input closed)\n")
			return Verdict{Outcome: tool.Cancelled, Reason: "the terminal input closed"}, nil
		}
		switch strings.ToLower(strings.TrimSpace(r.line)) {
		case "y", "yes":
			return Verdict{Outcome: tool.AllowedOnce, Reason: "allowed by the user"}, nil
		case "a", "always":
			if q.Command != "" {
				return Verdict{Outcome: tool.AllowedOnce, ForSession: true,
					Reason: "allowed by the user for the rest of the session"}, nil
			}
		}
		return Verdict{Outcome: tool.Rejected, Reason: "denied by the user"}, nil
	case <-ctx.Done():
		req.abandoned.Store(true)
		t.write("\n(cancelled)\n")
		return cancelled, nil
	}
}

// Converse holds the terminal for fn, as an approval ask does: asks wait
// until fn returns. fn's read shows prompt and reads one line; it fails
// when the input closed or ctx ended (the question tools put their forms
// on dsh run's terminal this way).
func (t *Terminal) Converse(ctx context.Context, fn func(read func(prompt string) (string, error)) error) error {
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-t.sem }()
	t.once.Do(func() { go t.readLoop() })
	read := func(prompt string) (string, error) {
		req := &readReq{reply: make(chan readResult, 1)}
		select {
		case <-t.reqs: // a cancelled read's request (the terminal is held)
		default:
		}
		t.reqs <- req
		t.write(prompt)
		select {
		case r := <-req.reply:
			if r.err != nil {
				t.write("\n(no answer: input closed)\n")
				return "", fmt.Errorf("the terminal input closed: %w", r.err)
			}
			return r.line, nil
		case <-ctx.Done():
			req.abandoned.Store(true)
			t.write("\n(cancelled)\n")
			return "", context.Cause(ctx)
		}
	}
	return fn(read)
}

// readLoop reads one line per request. After end of input (or a read
// error) every request gets that error at once.
func (t *Terminal) readLoop() {
	var sticky error
	for req := range t.reqs {
		if req.abandoned.Load() {
			continue // cancelled before its read began: read nothing for it
		}
		if sticky != nil {
			req.reply <- readResult{err: sticky}
			continue
		}
		line, err := t.in.ReadString('\n')
		if err != nil {
			sticky = err
			if line == "" {
				req.reply <- readResult{err: err}
				continue
			}
		}
		if req.abandoned.Load() {
			t.write("(ignored: that answer was for a cancelled request)\n")
		}
		req.reply <- readResult{line: line}
	}
}

func (t *Terminal) write(s string) {
	t.outM.Lock()
	defer t.outM.Unlock()
	_, _ = io.WriteString(t.out, s)
}

// renderQuestion renders a question. Every shown value is sanitised so that a
// command cannot rewrite the prompt with terminal control sequences.
func renderQuestion(q Question) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nApproval needed for %s\n", clean(q.ToolName))
	if q.Command != "" {
		fmt.Fprintf(&b, "  command: %s\n", indent(clean(q.Command)))
	} else if len(q.Arguments) > 0 {
		args := string(q.Arguments)
		if len(args) > maxShownArgs {
			args = args[:maxShownArgs] + "…"
		}
		fmt.Fprintf(&b, "  arguments: %s\n", indent(clean(args)))
	}
	fmt.Fprintf(&b, "  cwd:     %s\n", clean(q.Cwd))
	if q.Reason != "" {
		fmt.Fprintf(&b, "  reason:  %s\n", indent(clean(q.Reason)))
	}
	if q.Note != "" {
		fmt.Fprintf(&b, "  note:    %s\n", indent(clean(q.Note)))
	}
	if q.Command != "" {
		b.WriteString("Allow once? [y/N, or a = allow this exact command for the rest of the session] ")
	} else {
		b.WriteString("Allow once? [y/N] ")
	}
	return b.String()
}

// clean escapes control characters (except newline and tab) and bidi
// overrides, which could hide or rewrite what the prompt shows.
func clean(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// indent aligns continuation lines of a multi-line value.
func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n           ") }
