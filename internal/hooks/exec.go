package hooks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/proc"
)

// Output bounds: what dsh keeps of a hook's stdout (it must hold one JSON
// answer) and stderr (a reason); the rest is read and dropped so that a
// chatty hook neither blocks on a full pipe nor fills memory.
const (
	MaxStdout = 1 << 20
	MaxStderr = 64 << 10
)

// ExecResult is how one hook process ended.
type ExecResult struct {
	ExitCode int
	// Stdout is at most MaxStdout bytes; StdoutBytes counts all of it.
	Stdout      []byte
	StdoutBytes int64
	Stderr      string
	TimedOut    bool
	Cancelled   bool
	Duration    time.Duration
	// Err is set when the process could not be started.
	Err error
}

// drainGrace bounds the wait for a hook's stdout to end after it exited.
const drainGrace = 200 * time.Millisecond

var errHookTimeout = errors.New("hook timed out")

// Exec runs command with /bin/sh in dir, in its own process group, with
// stdin as its standard input, under timeout. When ctx ends (the turn was
// cancelled) or the timeout passes, the whole group is killed (TERM, then
// KILL after a grace).
func Exec(ctx context.Context, command, dir string, env map[string]string, stdin []byte, timeout time.Duration) ExecResult {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	start := time.Now()
	hctx, cancel := context.WithTimeoutCause(ctx, timeout, errHookTimeout)
	defer cancel()
	p, err := proc.Start(hctx, proc.Spec{
		Argv: []string{"/bin/sh", "-c", command},
		Dir:  dir,
		// A hook is the user's own command, like their shell: it sees
		// dsh's environment, as Claude Code's hooks see Claude's.
		Env:         proc.EnvPolicy{Exact: os.Environ(), Set: env},
		StderrLimit: MaxStderr,
		KillGrace:   time.Second,
	})
	if err != nil {
		return ExecResult{ExitCode: -1, Err: err, Duration: time.Since(start)}
	}
	var out boundedBuffer
	var wg sync.WaitGroup
	wg.Add(2)
	readDone := make(chan struct{})
	go func() {
		defer wg.Done()
		defer close(readDone)
		_, _ = io.Copy(&out, p.Stdout())
	}()
	go func() {
		defer wg.Done()
		// A hook that does not read its stdin gets EPIPE here; that is its
		// business.
		_, _ = p.Stdin().Write(stdin)
		_ = p.Stdin().Close()
	}()
	info, werr := p.Wait()
	// What the hook wrote before it exited is still in the pipe: read it
	// before the teardown closes our end. A background child that keeps
	// the pipe open gets drainGrace, then the teardown.
	t := time.NewTimer(drainGrace)
	select {
	case <-readDone:
	case <-t.C:
	}
	t.Stop()
	tctx, tcancel := context.WithTimeout(context.Background(), proc.KillWait)
	p.Teardown(tctx)
	tcancel()
	wg.Wait()
	res := ExecResult{ExitCode: info.Code, Stdout: out.Bytes(), StdoutBytes: out.total, Stderr: string(p.Stderr()), Duration: time.Since(start)}
	if werr != nil {
		res.ExitCode, res.Err = -1, werr
	}
	if info.Signaled {
		res.ExitCode = 128 + int(info.Signal)
	}
	if hctx.Err() != nil {
		if errors.Is(context.Cause(hctx), errHookTimeout) {
			res.TimedOut = true
		} else {
			res.Cancelled = true
		}
	}
	return res
}

// boundedBuffer keeps the first MaxStdout bytes written to it and counts
// the rest.
type boundedBuffer struct {
	b     bytes.Buffer
	total int64
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if room := MaxStdout - w.b.Len(); room > 0 {
		w.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (w *boundedBuffer) Bytes() []byte { return w.b.Bytes() }
