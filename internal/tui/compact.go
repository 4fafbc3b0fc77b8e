package tui

import (
	"context"
	"fmt"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/host"
)

// compactLive runs /compact on idle session id of h as `dsh compact` does
// on a stored one: the host disposes the session (flushing its log and
// releasing its lease), the compactor runs over the stored session under
// its own lease, and the host resumes it. The session is never open twice
// at once, and the compaction events reach the log like any others, so
// the UI renders them from the log it follows.
func compactLive(ctx context.Context, h *host.Host, id string) (string, error) {
	info, err := h.Get(ctx, id)
	if err != nil {
		return "", err
	}
	if info.Status != host.StatusIdle && info.Live {
		return "", fmt.Errorf("the session is busy: /compact waits for the turn to end")
	}
	if err := h.Dispose(ctx, id); err != nil {
		return "", err
	}
	summary, cerr := compactStored(ctx, h.App(), id)
	// The session is opened again whatever the compaction did, so the UI
	// keeps a live session.
	if _, err := h.Resume(ctx, host.ResumeRequest{ID: id}); err != nil && cerr == nil {
		cerr = err
	}
	return summary, cerr
}

func compactStored(ctx context.Context, a *app.App, id string) (string, error) {
	sess, err := a.OpenSession(ctx, app.SessionOptions{ResumeID: id, Holder: "dsh tui /compact"})
	if err != nil {
		return "", err
	}
	defer sess.Close()
	if sess.Compactor == nil {
		return "", fmt.Errorf("compaction is disabled in the profile")
	}
	res, err := sess.Compactor.Compact(ctx, "")
	if ferr := sess.Log.Flush(context.WithoutCancel(ctx)); err == nil {
		err = ferr
	}
	if err != nil {
		return "", fmt.Errorf("compact: %w", err)
	}
	return res.String(), nil
}
