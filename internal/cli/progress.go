package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/cli/progress"
	"github.com/dsh-dev/dsh/internal/session"
)

// progressTick is how often the "waiting for the model" line refreshes
// its elapsed time while nothing arrives.
const progressTick = time.Second

// progressOut is where dsh run's progress stream goes, and how.
type progressOut struct {
	w io.Writer
	r *progress.Renderer
	// tty says w is a terminal, whose width is read again before each
	// batch so that a resize takes effect.
	tty bool
	// tick is how often a waiting line is refreshed; 0 when the output
	// is no terminal (nothing there is transient).
	tick time.Duration
}

// newProgress decides whether dsh run streams progress to stderr: on
// when stderr is a terminal (unless --quiet or --json), or when forced
// with --progress. It returns nil when off. Colour follows NO_COLOR and
// TERM=dumb; transient lines and truncation need a terminal.
func newProgress(stdio IO, force, quiet, asJSON bool) *progressOut {
	cols, tty := termWidth(stdio.Stderr)
	if quiet || !(force || (tty && !asJSON)) {
		return nil
	}
	o := progress.Options{}
	if tty {
		o.Transient = os.Getenv("TERM") != "dumb"
		o.Color = o.Transient && os.Getenv("NO_COLOR") == ""
		o.Width = cols
	} else if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
		o.Width = c
	}
	p := &progressOut{w: stdio.Stderr, r: progress.New(o), tty: tty}
	if o.Transient {
		p.tick = progressTick
	}
	return p
}

// termWidth reports whether w is a terminal and its width in columns.
func termWidth(w io.Writer) (cols int, tty bool) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, false
	}
	return int(ws.Col), true
}

// next reads the next batch from f for the progress stream: while the
// renderer waits for a first byte it wakes every tick to refresh the
// waiting line instead of blocking until the next event.
func (p *progressOut) next(ctx context.Context, f *session.Follower) ([]session.Event, error) {
	if p == nil || p.tick == 0 {
		return f.Next(ctx, 256)
	}
	for {
		tctx, cancel := context.WithTimeoutCause(ctx, p.tick, errTick)
		batch, err := f.Next(tctx, 256)
		cancel()
		if errors.Is(err, errTick) && ctx.Err() == nil {
			if b := p.r.Tick(time.Now()); len(b) > 0 {
				_, _ = p.w.Write(b)
			}
			continue
		}
		return batch, err
	}
}

var errTick = errors.New("progress tick")

// events renders a batch in one write; a nil p renders nothing.
func (p *progressOut) events(batch []session.Event) {
	if p == nil {
		return
	}
	if p.tty {
		if cols, ok := termWidth(p.w); ok {
			p.r.SetWidth(cols)
		}
	}
	var b []byte
	for _, e := range batch {
		b = append(b, p.r.Event(e)...)
	}
	if len(b) > 0 {
		_, _ = p.w.Write(b)
	}
}

// close writes the closing line once the stream has caught up.
func (p *progressOut) close() {
	if p != nil {
		_, _ = p.w.Write(p.r.Close())
	}
}
