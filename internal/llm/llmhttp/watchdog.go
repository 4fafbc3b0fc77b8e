package llmhttp

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// Watchdog cancels a request when no byte has arrived for its timeout. It
// is a timer reset on every read rather than a goroutine, so nothing is
// left running once it is stopped. Cancelling the request context
// (instead of closing the body) is what reliably unblocks a Read in
// progress: the transport closes the connection when the context ends.
type Watchdog struct {
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

// NewWatchdog starts a watchdog that calls cancel once d passes without a
// Kick.
func NewWatchdog(d time.Duration, cancel context.CancelFunc) *Watchdog {
	w := &Watchdog{d: d}
	w.t = time.AfterFunc(d, func() {
		w.fired.Store(true)
		cancel()
	})
	return w
}

// Kick restarts the countdown: the provider sent something.
func (w *Watchdog) Kick() { w.t.Reset(w.d) }

// Stop ends the countdown for good.
func (w *Watchdog) Stop() { w.t.Stop() }

// Fired reports whether the watchdog cancelled the request.
func (w *Watchdog) Fired() bool { return w.fired.Load() }

// Timeout returns the idle limit the watchdog enforces.
func (w *Watchdog) Timeout() time.Duration { return w.d }

// Reader returns r with every read that returns bytes kicking w, so SSE
// comments and partial events count as activity just like whole events.
func (w *Watchdog) Reader(r io.Reader) io.Reader { return activityReader{r: r, w: w} }

type activityReader struct {
	r io.Reader
	w *Watchdog
}

func (a activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.w.Kick()
	}
	return n, err
}
