package proc

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// Run and RunRemote differ only in who started the command and who
// reaps its group; capturing its output, the ctx teardown sequence and
// the Outcome are the same and live here.

// limits returns spec's output limit and kill grace with the defaults
// applied.
func (spec Spec) limits() (limit int, grace time.Duration) {
	limit, grace = spec.OutputLimit, spec.KillGrace
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	return limit, grace
}

// capture reads the output pipe pr into a head+tail buffer of limit
// bytes until EOF or a read error (see drain); the goroutine ends then.
type capture struct {
	pr   *os.File
	buf  *headTail
	done chan struct{}
}

func startCapture(pr *os.File, limit int) *capture {
	c := &capture{pr: pr, buf: newHeadTail(limit), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		b := make([]byte, 32<<10)
		for {
			n, err := pr.Read(b)
			c.buf.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	return c
}

// drain waits for the reader once the command's group is gone: EOF comes
// at once unless a process that escaped the group holds the pipe, which
// drainDelay bounds. It closes pr.
func (c *capture) drain() {
	_ = c.pr.SetReadDeadline(time.Now().Add(drainDelay))
	<-c.done
	c.pr.Close()
}

// awaitOrStop waits for done (the command exited). When ctx ends first
// and the command still runs, it sends SIGTERM through signal, then
// SIGKILL after grace, and still waits for done. It returns the signals
// sent and ctx's error when the command was signalled for it.
func awaitOrStop(ctx context.Context, done <-chan struct{}, signal func(syscall.Signal), grace time.Duration) (signals []string, cause error) {
	select {
	case <-done:
	case <-ctx.Done():
		select {
		case <-done: // exited on its own: not killed for ctx
		default:
			cause = ctx.Err()
			signal(syscall.SIGTERM)
			signals = append(signals, "SIGTERM")
			t := time.NewTimer(grace)
			select {
			case <-done:
			case <-t.C:
				signal(syscall.SIGKILL)
				signals = append(signals, "SIGKILL")
				<-done
			}
			t.Stop()
		}
	}
	return signals, cause
}

// outcome is the Outcome of a drained capture. failed means the
// command's end is unknown: the exit code reads -1.
func (c *capture) outcome(cause error, duration time.Duration, teardown TeardownResult, exit ExitInfo, failed bool) Outcome {
	total, elided := c.buf.counts()
	out := Outcome{
		Output:     c.buf.Bytes(),
		Elided:     elided,
		TotalBytes: total,
		Duration:   duration,
		TimedOut:   errors.Is(cause, context.DeadlineExceeded),
		Cancelled:  cause != nil && !errors.Is(cause, context.DeadlineExceeded),
		Teardown:   teardown,
		ExitCode:   exit.Code,
		Signaled:   exit.Signaled,
	}
	if failed {
		out.ExitCode = -1
	}
	return out
}
