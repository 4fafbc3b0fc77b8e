package bash

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/tool"
)

// The persistent shell (Options.Persistent): one long-lived bash per
// session, fed each command on its stdin, so that what a command changes
// in the shell (the directory after cd, variables, functions, aliases,
// set options) carries over to the next. Each command runs as
//
//	eval -- '<command>' </dev/null 2>&1
//	printf '\n<marker> %d %s\n' "$?" "$PWD"
//
// and its output is what comes before the marker, whose number is the
// exit code (and the shell's directory afterwards, the result's workdir). The command reads /dev/null, never the protocol. On a
// timeout or a cancellation the whole shell (its process group) is
// killed, as a one-shot command is, and the next call starts a new one:
// the result says that the state is lost. The same happens when the
// shell exits (an `exit` in a command) and when the session's sandbox
// policy changed since the shell started. A call with a workdir runs in
// a subshell there (its state changes stay in that subshell); an
// escalated call (sandbox_permissions) and a background call run as
// one-shot commands, outside the persistent shell.

// shellPool holds the session's shells (one per session id).
type shellPool struct {
	mu     sync.Mutex
	shells map[string]*shell // guarded by mu
	closed bool              // guarded by mu
}

func newShellPool() *shellPool { return &shellPool{shells: map[string]*shell{}} }

// Close kills every shell; a later call fails.
func (p *shellPool) Close() error {
	p.mu.Lock()
	p.closed = true
	ss := p.shells
	p.shells = map[string]*shell{}
	p.mu.Unlock()
	for _, s := range ss {
		s.kill()
	}
	return nil
}

// shell is one running bash and what it has printed since the current
// command started.
type shell struct {
	p       *proc.Process
	policy  any // the sandbox policy it runs under (nil: unconfined)
	conf    *Confinement
	secrets []string

	mu      sync.Mutex
	out     outBuffer
	changed chan struct{} // closed and replaced on output and at EOF
	eof     bool
	done    chan struct{} // closed when the reader returned
}

func (s *shell) reader() {
	defer close(s.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := s.p.Stdout().Read(buf)
		s.mu.Lock()
		if n > 0 {
			s.out.write(buf[:n])
		}
		if err != nil {
			s.eof = true
		}
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (s *shell) kill() {
	s.p.Teardown(context.Background())
	<-s.done
}

// outBuffer keeps a command's output bounded: the first half of limit,
// and a tail long enough for the limit's second half plus the marker.
type outBuffer struct {
	limit      int
	head, tail []byte
	elided     int64
	total      int64
}

func (b *outBuffer) reset(limit int) { *b = outBuffer{limit: limit} }

func (b *outBuffer) write(p []byte) {
	b.total += int64(len(p))
	b.tail = append(b.tail, p...)
	// Everything stays in tail (where the end marker is looked for) until
	// the output outgrows the limit; then the head is split off once and
	// the tail trimmed, amortised, to its half plus room for the marker.
	if b.head == nil && len(b.tail) > b.limit {
		b.head = append([]byte(nil), b.tail[:b.limit/2]...)
		b.tail = append(b.tail[:0], b.tail[b.limit/2:]...)
	}
	keep := b.limit - b.limit/2 + 256
	if b.head != nil && len(b.tail) > 2*keep {
		drop := len(b.tail) - keep
		b.elided += int64(drop)
		b.tail = append(b.tail[:0], b.tail[drop:]...)
	}
}

func newEndMarker() string {
	var r [12]byte
	_, _ = rand.Read(r[:])
	return "__DSH_CMD_END_" + hex.EncodeToString(r[:]) + "__"
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// start starts a new shell for the call's session.
func (p *shellPool) start(o Options, c *tool.Call) (*shell, error) {
	env, secrets := o.environ(c.SessionID)
	argv := []string{o.Shell, "--noprofile", "--norc"}
	var conf *Confinement
	var policy any
	if o.Confine != nil {
		cf, err := o.Confine(c, argv)
		if err != nil {
			return nil, confineError(err)
		}
		conf, policy = &cf, cf.Policy
		argv, env = cf.Argv, append(env, cf.Env...)
	}
	dir, err := resolveWorkdir(c.Cwd, "")
	if err != nil {
		return nil, err
	}
	spec := proc.Spec{Argv: argv, Dir: dir, Env: proc.EnvPolicy{Exact: env}}
	if conf != nil {
		spec.SysProcAttr = conf.ProcAttr
	}
	pr, err := proc.Start(context.Background(), spec)
	if err != nil {
		return nil, tool.Errorf(tool.CodeFailed, "could not start %s: %v", o.Shell, err)
	}
	s := &shell{p: pr, policy: policy, conf: conf, secrets: secrets, changed: make(chan struct{}), done: make(chan struct{})}
	go s.reader()
	return s, nil
}

// currentPolicy is the call's sandbox policy (nil: unconfined), to tell
// whether a running shell still matches the session's mode.
func currentPolicy(o Options, c *tool.Call) any {
	if o.Confine == nil {
		return nil
	}
	cf, err := o.Confine(c, []string{o.Shell})
	if err != nil {
		return nil
	}
	return cf.Policy
}

// get returns the session's shell, starting one when there is none or
// the policy changed (note says so).
func (p *shellPool) get(o Options, c *tool.Call) (s *shell, note string, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, "", tool.Errorf(tool.CodeFailed, "the session's shells are closed")
	}
	s = p.shells[c.SessionID]
	p.mu.Unlock()
	if s != nil {
		if !reflect.DeepEqual(s.policy, currentPolicy(o, c)) {
			p.drop(c.SessionID, s)
			s.kill()
			s, note = nil, "[the sandbox mode changed: started a new shell (cd and variables are reset)]"
		}
	}
	if s == nil {
		if s, err = p.start(o, c); err != nil {
			return nil, "", err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			s.kill()
			return nil, "", tool.Errorf(tool.CodeFailed, "the session's shells are closed")
		}
		p.shells[c.SessionID] = s
		p.mu.Unlock()
	}
	return s, note, nil
}

func (p *shellPool) drop(id string, s *shell) {
	p.mu.Lock()
	if p.shells[id] == s {
		delete(p.shells, id)
	}
	p.mu.Unlock()
}

// executePersistent runs a foreground command in the session's shell.
func executePersistent(ctx context.Context, o Options, c *tool.Call, a args, timeout time.Duration, notes []string) (tool.Result, error) {
	s, note, err := o.shells.get(o, c)
	if err != nil {
		return tool.Result{}, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	marker := newEndMarker()
	cmd := "eval -- " + shellQuote(a.Command)
	runDir := "" // the subshell's directory of a workdir call
	if a.Workdir != "" {
		dir, err := resolveWorkdir(c.Cwd, a.Workdir)
		if err != nil {
			return tool.Result{}, err
		}
		cmd = "( builtin cd -- " + shellQuote(dir) + " && " + cmd + " )"
		runDir = dir
	}
	script := cmd + " </dev/null 2>&1\nprintf '\\n" + marker + " %d %s\\n' \"$?\" \"$PWD\"\n"
	s.mu.Lock()
	s.out.reset(o.OutputLimit)
	s.mu.Unlock()
	start := time.Now()
	if _, err := io.WriteString(s.p.Stdin(), script); err != nil {
		o.shells.drop(c.SessionID, s)
		s.kill()
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "the persistent shell is gone (%v); the next command starts a new one", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	end := []byte("\n" + marker + " ")
	var (
		exit              = -1
		workdir           = cmp.Or(runDir, c.Cwd)
		timedOut, aborted bool
		shellExit, elided = false, int64(0)
		head, tail        []byte
		total             int64
	)
	for {
		s.mu.Lock()
		ch, eof := s.changed, s.eof
		if i := bytes.Index(s.out.tail, end); i >= 0 {
			if j := bytes.IndexByte(s.out.tail[i+len(end):], '\n'); j >= 0 {
				code, pwd, _ := strings.Cut(string(s.out.tail[i+len(end):i+len(end)+j]), " ")
				exit, _ = strconv.Atoi(code)
				workdir = cmp.Or(runDir, pwd)
				head, tail, elided = s.out.head, s.out.tail[:i], s.out.elided
				total = s.out.total - int64(len(s.out.tail)-i)
				s.mu.Unlock()
				break
			}
		}
		if eof {
			head, tail, elided, total = s.out.head, s.out.tail, s.out.elided, s.out.total
			s.mu.Unlock()
			shellExit = true
			break
		}
		s.mu.Unlock()
		select {
		case <-ch:
			continue
		case <-timer.C:
			timedOut = true
		case <-ctx.Done():
			aborted = true
		}
		o.shells.drop(c.SessionID, s)
		s.kill()
		s.mu.Lock()
		head, tail, elided, total = s.out.head, s.out.tail, s.out.elided, s.out.total
		s.mu.Unlock()
		break
	}
	if shellExit {
		o.shells.drop(c.SessionID, s)
		s.kill()
		info, _ := s.p.Wait()
		exit = info.Code
	}
	output := append(append([]byte(nil), head...), tail...)
	body := string(head)
	if elided > 0 {
		body += fmt.Sprintf("\n\n... [%d bytes elided] ...\n\n", elided)
	}
	body += string(tail)
	body = redactSecrets(strings.TrimRight(strings.ToValidUTF8(body, "\uFFFD"), "\n"), s.secrets)
	if body == "" {
		body = "(no output)"
	}
	var text strings.Builder
	text.WriteString(body + "\n\n")
	for _, n := range notes {
		text.WriteString(n + "\n")
	}
	res := tool.Result{}
	m := meta{ExitCode: exit, DurationMs: time.Since(start).Milliseconds(), ElidedBytes: elided, TotalBytes: total, Workdir: workdir, TimedOut: timedOut, Cancelled: aborted}
	switch {
	case timedOut:
		fmt.Fprintf(&text, "[timed out after %s; the shell was killed: the next command starts a new shell (cd and variables are reset)]", human(timeout))
		res.IsError = true
		res.Error = tool.Errorf(tool.CodeTimeout, "command timed out after %s", human(timeout))
	case aborted:
		text.WriteString("[cancelled; the shell was killed: the next command starts a new shell]")
		res.IsError = true
		res.Error = tool.Errorf(tool.CodeAborted, "tool call cancelled")
	default:
		if shellExit {
			text.WriteString("[the shell exited; the next command starts a new shell (cd and variables are reset)]\n")
		}
		fmt.Fprintf(&text, "[exit code: %d]", exit)
	}
	if s.conf != nil {
		m.SandboxMode = string(s.conf.Policy.Mode)
		if !timedOut && !aborted && s.conf.Denied != nil && s.conf.Denied(exit, output) {
			m.SandboxDenied = true
			text.WriteString("\n" + denialMarker(s.conf.Policy, output))
		}
	}
	res.Content = tool.Text(text.String()).Content
	res.Meta, _ = json.Marshal(m)
	return res, nil
}
