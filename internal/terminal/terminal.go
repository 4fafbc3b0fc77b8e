// Package terminal is the PTY manager behind the terminal_* tools:
// persistent pseudo-terminals (a REPL, a shell, a dev server, an
// interactive installer) owned by an agent session, written to and read
// from across tool calls.
//
// Each terminal runs one command on the slave side of a PTY whose master
// dsh holds. The command is started through internal/proc (its own
// session and process group, Pdeathsig, the guardian that kills the
// group when dsh dies, SIGKILL included) with the argv the caller built:
// the bash tool's sandbox wrapping around sandbox.ControllingTTY, so
// that the command is confined exactly like a bash command and still has
// the PTY as its controlling terminal (^C and signals reach its
// foreground job).
//
// Output goes into a bounded ring per terminal addressed by absolute
// byte offsets (bytes since the terminal opened), so that reads page
// correctly after the ring wrapped and say how much scrolled out. A
// terminal stays listed after its command exited, with its exit status
// and last output, until it is closed. Every terminal ends with its
// owner (CloseOwner) and with the Manager (Close).
package terminal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
	"github.com/dsh-dev/dsh/internal/ring"
)

// Defaults for zero Options fields.
const (
	DefaultMaxPerOwner = 8
	DefaultScrollback  = 1 << 20
	// writeWait bounds a write to a terminal whose command does not read
	// its input (the PTY's input queue is full).
	writeWait = 10 * time.Second
)

// Stable error codes.
const (
	CodeNotFound    = "TERMINAL_NOT_FOUND"
	CodeLimit       = "TERMINAL_LIMIT"
	CodeClosed      = "TERMINAL_CLOSED"
	CodeStartFailed = "TERMINAL_START_FAILED"
	CodeWriteFailed = "TERMINAL_WRITE_FAILED"
	CodeSignal      = "TERMINAL_SIGNAL_FAILED"
)

// Error is a terminal failure with a stable code.
type Error struct {
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }
func (e *Error) Unwrap() error { return e.Err }

func errorf(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// Options configures a Manager.
type Options struct {
	// MaxPerOwner is how many running terminals one owner may hold;
	// <= 0 means DefaultMaxPerOwner.
	MaxPerOwner int
	// Scrollback is the size of each terminal's output ring in bytes;
	// <= 0 means DefaultScrollback.
	Scrollback int
}

// Spec describes a terminal to open.
type Spec struct {
	// Owner is the session that may use the terminal.
	Owner string
	// Name is an optional label; Type is what runs (shell, python, …).
	Name, Type string
	// Command is the command line as the model sees it (for listings).
	Command string
	// Argv is the program to run, already wrapped for the sandbox.
	Argv []string
	// Dir is its working directory; Env its whole environment.
	Dir string
	Env []string
	// SysProcAttr is the sandbox's adjustment of the process attributes.
	SysProcAttr func(*syscall.SysProcAttr)
	// Prompt, when set, matches the end of the output when the command
	// waits for input (">>> " for python); Send uses it to settle.
	Prompt *regexp.Regexp
	// Sandbox is the sandbox mode it runs under ("" = unconfined).
	Sandbox string
	// Redact removes secrets from output text (nil: none).
	Redact func(string) string
	// MaxPerOwner and Scrollback override the Manager's options for this
	// terminal when > 0 (a profile row's configuration).
	MaxPerOwner, Scrollback int
}

// Info is a snapshot of a terminal.
type Info struct {
	ID, Owner, Name, Type, Command, Dir, Sandbox string
	Pid                                          int
	Started                                      time.Time
	// Running is false once the command exited (or the terminal closed).
	Running bool
	// ExitCode is the command's status once it exited (128+signal).
	ExitCode *int
	Closed   bool
	// OutputBytes is all output so far; DroppedBytes what scrolled out.
	OutputBytes, DroppedBytes int64
}

// Manager holds the terminals of a process. It is safe for concurrent use.
type Manager struct {
	max, scrollback int

	mu     sync.Mutex
	terms  map[string]*Terminal // guarded by mu
	seq    int                  // guarded by mu
	closed bool                 // guarded by mu
}

// New returns an empty Manager.
func New(o Options) *Manager {
	if o.MaxPerOwner <= 0 {
		o.MaxPerOwner = DefaultMaxPerOwner
	}
	if o.Scrollback <= 0 {
		o.Scrollback = DefaultScrollback
	}
	return &Manager{max: o.MaxPerOwner, scrollback: o.Scrollback, terms: map[string]*Terminal{}}
}

// Terminal is one PTY and its command.
type Terminal struct {
	id   string
	spec Spec
	pid  int

	master  *os.File
	p       *proc.Process
	started time.Time
	// done is closed when the reader has seen the end of the output and
	// the command's group is torn down.
	done chan struct{}

	mu      sync.Mutex
	out     *ring.Buffer  // guarded by mu
	changed chan struct{} // guarded by mu; closed and replaced on output and at the end
	exited  bool          // guarded by mu
	exit    int           // guarded by mu
	closed  bool          // guarded by mu
	cursor  int64         // guarded by mu; where the owner's last read stopped
}

// Open starts a terminal for spec.Owner. It fails with TERMINAL_LIMIT
// when the owner already runs MaxPerOwner terminals.
func (m *Manager) Open(ctx context.Context, spec Spec) (*Terminal, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("terminal: empty argv")
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errorf(CodeClosed, nil, "terminals are shut down")
	}
	running := 0
	for _, t := range m.terms {
		if t.spec.Owner == spec.Owner && t.Info().Running {
			running++
		}
	}
	limit, scrollback := m.max, m.scrollback
	if spec.MaxPerOwner > 0 {
		limit = spec.MaxPerOwner
	}
	if spec.Scrollback > 0 {
		scrollback = spec.Scrollback
	}
	if running >= limit {
		m.mu.Unlock()
		return nil, errorf(CodeLimit, nil, "this session already runs %d terminals (the limit); close one with terminal_close first", limit)
	}
	m.seq++
	id := "term-" + strconv.Itoa(m.seq)
	dropped := m.pruneLocked(spec.Owner, limit)
	m.mu.Unlock()
	// Forgotten exited terminals: their pumps have ended; this only
	// closes their masters.
	shutdownAll(dropped)

	master, slave, err := openPTY()
	if err != nil {
		return nil, errorf(CodeStartFailed, err, "could not open a pseudo-terminal: %v", err)
	}
	p, err := proc.StartTTY(context.WithoutCancel(ctx), proc.Spec{
		Argv: spec.Argv, Dir: spec.Dir, Env: proc.EnvPolicy{Exact: spec.Env}, SysProcAttr: spec.SysProcAttr,
	}, slave)
	slave.Close() // the child has its copies; the master reads EIO once they are gone
	if err != nil {
		master.Close()
		return nil, errorf(CodeStartFailed, err, "could not start %s: %v", spec.Argv[0], err)
	}
	t := &Terminal{
		id: id, spec: spec, pid: p.Pid(), master: master, p: p, started: time.Now(),
		done: make(chan struct{}), out: ring.New(scrollback), changed: make(chan struct{}),
	}
	go t.pump()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		t.shutdown()
		return nil, errorf(CodeClosed, nil, "terminals are shut down")
	}
	m.terms[id] = t
	m.mu.Unlock()
	return t, nil
}

// pump copies the master's output into the ring until the command and
// everything holding the slave are gone (EIO) or the terminal is closed,
// then tears the command's group down and records its exit.
func (t *Terminal) pump() {
	defer close(t.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.mu.Lock()
			t.out.Write(buf[:n])
			t.wakeLocked()
			t.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	t.p.Teardown(context.Background())
	info, _ := t.p.Wait()
	t.mu.Lock()
	t.exited, t.exit = true, info.Code
	t.wakeLocked()
	t.mu.Unlock()
}

func (t *Terminal) wakeLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// shutdown ends the command and waits until the pump has finished.
func (t *Terminal) shutdown() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.p.Teardown(context.Background())
	// The group is gone; closing the master ends a Read that a process
	// outside the group (none should exist) could keep alive.
	t.master.Close()
	<-t.done
}

// ID is the terminal's id ("term-N").
func (t *Terminal) ID() string { return t.id }

// Prompt is the spec's prompt pattern (nil: none known).
func (t *Terminal) Prompt() *regexp.Regexp { return t.spec.Prompt }

// Info returns a snapshot.
func (t *Terminal) Info() Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := Info{
		ID: t.id, Owner: t.spec.Owner, Name: t.spec.Name, Type: t.spec.Type, Command: t.spec.Command,
		Dir: t.spec.Dir, Sandbox: t.spec.Sandbox, Pid: t.pid, Started: t.started,
		Running: !t.exited && !t.closed, Closed: t.closed,
		OutputBytes: t.out.Total(), DroppedBytes: t.out.First(),
	}
	if t.exited {
		c := t.exit
		i.ExitCode = &c
	}
	return i
}

// Write sends p to the command's input. It fails with TERMINAL_CLOSED
// once the command exited, and with TERMINAL_WRITE_FAILED when the
// command does not take its input within a bound.
func (t *Terminal) Write(ctx context.Context, p []byte) error {
	if !t.Info().Running {
		return t.closedError()
	}
	// No lock of ours is held over the write: the file's own write lock
	// keeps two writes from interleaving, and Write writes everything.
	deadline := time.Now().Add(writeWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = t.master.SetWriteDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = t.master.SetWriteDeadline(time.Now()) })
	defer stop()
	if _, err := t.master.Write(p); err != nil {
		if !t.Info().Running {
			return t.closedError()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errorf(CodeWriteFailed, err, "%s did not take its input within %s (it is not reading it)", t.id, writeWait)
	}
	return nil
}

func (t *Terminal) closedError() error {
	i := t.Info()
	if i.ExitCode != nil && !i.Closed {
		return errorf(CodeClosed, nil, "%s has exited with status %d; read its last output with terminal_read or close it", t.id, *i.ExitCode)
	}
	return errorf(CodeClosed, nil, "%s is closed", t.id)
}

// Page is a read of a terminal's output.
type Page struct {
	// Data are the raw bytes from Start to Next.
	Data []byte
	// Start is where Data begins: the requested offset, or the oldest
	// kept byte when that offset scrolled out (Dropped bytes before it).
	Start, Next, Dropped int64
	// Total is all output so far; More says bytes after Next exist.
	Total int64
	More  bool
}

// Read returns up to count bytes of output from offset (count <= 0:
// everything kept from there). A negative offset counts back from the
// end (-2000: the last 2000 bytes). The page never ends inside an escape
// or UTF-8 sequence, unless the command has ended: Next is where to read
// on.
func (t *Terminal) Read(offset int64, count int) Page {
	t.mu.Lock()
	defer t.mu.Unlock()
	if offset < 0 {
		offset = max(0, t.out.Total()+offset)
	}
	data, start, dropped := t.out.Read(offset, count)
	if !t.exited {
		data = data[:complete(data)]
	}
	next := start + int64(len(data))
	return Page{Data: data, Start: start, Next: next, Dropped: dropped, Total: t.out.Total(), More: next < t.out.Total()}
}

// Wait blocks until the output has grown past offset, the command has
// exited, or ctx is done; it reports the total output and whether the
// command is still running.
func (t *Terminal) Wait(ctx context.Context, offset int64) (total int64, running bool, err error) {
	for {
		t.mu.Lock()
		total, running = t.out.Total(), !t.exited && !t.closed
		ch := t.changed
		t.mu.Unlock()
		if total > offset || !running {
			return total, running, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return total, running, ctx.Err()
		}
	}
}

// Signal sends sig to the terminal's foreground job, as the terminal
// itself would (TIOCSIG): in a shell, the command it runs in the
// foreground; otherwise the command. Where the command does not hold the
// terminal as its controlling terminal, the command's process group gets
// it instead.
func (t *Terminal) Signal(sig syscall.Signal) error {
	if !t.Info().Running {
		return t.closedError()
	}
	if err := sendSignal(t.master, sig); err != nil {
		if err := t.p.Signal(sig); err != nil {
			return errorf(CodeSignal, err, "could not signal %s: %v", t.id, err)
		}
	}
	return nil
}

// Changed returns a channel closed at the next output or at the end,
// with the output total and whether the command still runs, read
// together.
func (t *Terminal) Changed() (ch <-chan struct{}, total int64, running bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed, t.out.Total(), !t.exited && !t.closed
}

// Text is raw output made readable (Clean) with secrets redacted.
func (t *Terminal) Text(b []byte) string {
	s := Clean(b)
	if t.spec.Redact != nil {
		s = t.spec.Redact(s)
	}
	return s
}

// Cursor is where the owner's last read stopped; SetCursor moves it.
func (t *Terminal) Cursor() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cursor
}

// SetCursor records where the owner's last read stopped.
func (t *Terminal) SetCursor(off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cursor = off
}

// Get returns owner's terminal id, or TERMINAL_NOT_FOUND (also for
// another owner's terminal: ids are predictable, so this is the
// boundary between sessions).
func (m *Manager) Get(owner, id string) (*Terminal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.terms[id]
	if !ok || t.spec.Owner != owner {
		return nil, errorf(CodeNotFound, nil, "no terminal %q in this session (terminal_list shows them)", id)
	}
	return t, nil
}

// List returns owner's terminals in opening order.
func (m *Manager) List(owner string) []Info {
	m.mu.Lock()
	ts := make([]*Terminal, 0, len(m.terms))
	for _, t := range m.terms {
		if t.spec.Owner == owner {
			ts = append(ts, t)
		}
	}
	m.mu.Unlock()
	out := make([]Info, len(ts))
	for i, t := range ts {
		out[i] = t.Info()
	}
	slices.SortFunc(out, func(a, b Info) int { return a.Started.Compare(b.Started) })
	return out
}

// Close ends owner's terminal id (TERM to its group, KILL after a grace)
// and forgets it; it returns its final snapshot.
func (m *Manager) Close(owner, id string) (Info, error) {
	t, err := m.Get(owner, id)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	delete(m.terms, id)
	m.mu.Unlock()
	t.shutdown()
	return t.Info(), nil
}

// CloseOwner ends every terminal of owner, waiting until they are gone:
// a session's terminals end with it.
func (m *Manager) CloseOwner(owner string) {
	m.mu.Lock()
	var ts []*Terminal
	for id, t := range m.terms {
		if t.spec.Owner == owner {
			ts = append(ts, t)
			delete(m.terms, id)
		}
	}
	m.mu.Unlock()
	shutdownAll(ts)
}

// Shutdown ends every terminal and makes Open fail from then on.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	m.closed = true
	ts := make([]*Terminal, 0, len(m.terms))
	for id, t := range m.terms {
		ts = append(ts, t)
		delete(m.terms, id)
	}
	m.mu.Unlock()
	shutdownAll(ts)
}

// pruneLocked forgets owner's oldest exited terminals beyond keep, so
// that a session opening and abandoning terminals does not hold their
// scrollback forever; call with m.mu held.
func (m *Manager) pruneLocked(owner string, keep int) []*Terminal {
	var exited []*Terminal
	for _, t := range m.terms {
		if t.spec.Owner == owner && !t.Info().Running {
			exited = append(exited, t)
		}
	}
	if len(exited) <= keep {
		return nil
	}
	slices.SortFunc(exited, func(a, b *Terminal) int { return a.started.Compare(b.started) })
	drop := exited[:len(exited)-keep]
	for _, t := range drop {
		delete(m.terms, t.id)
	}
	return drop
}

// shutdownAll ends terminals in parallel: each teardown may wait out a
// kill grace.
func shutdownAll(ts []*Terminal) {
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(t.shutdown)
	}
	wg.Wait()
}
