// Package tui is dsh's interactive terminal UI: a conversation in the
// terminal over the session host (internal/host), in process or, with
// --attach, over a dsh serve's HTTP API and SSE streams.
//
// It is a thin driver: everything it shows is folded from the session
// log it follows (host.Follow) and the host feed (pending approvals), and
// everything it does is a host call (Send, Cancel, Answer, Tree, List,
// Export). By default it draws inline: finished items are printed once
// into the terminal's own scrollback, and only the live area at the
// bottom (the streaming answer, running tools and subagents, the approval
// prompt, the composer and the status line) is redrawn.
package tui

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"
)

// Run opens the session o.Open names and runs the UI on in/out until the
// user leaves; it returns the exit status (0, or 130 after a double
// Ctrl-C) and the session's id.
func Run(ctx context.Context, o Options, in io.Reader, out io.Writer) (code int, id string, err error) {
	b := o.Backend
	info, err := b.Open(ctx, o.Open)
	if err != nil {
		return 0, "", err
	}
	id = info.Header.ID
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if out == nil {
		out = os.Stdout
	}
	// A resumed session's history is printed before the UI starts, as
	// plain lines into the scrollback: folding the stored log through the
	// same state and renderer is quick, where printing it through the
	// running UI goes a screenful at a time.
	st := newState()
	printed := false
	if info.Turns > 0 || info.LastSeq > 0 {
		events, err := b.Events(ctx, id)
		if err != nil {
			return 0, id, fmt.Errorf("read session %s: %w", id, err)
		}
		th, width := newTheme(o.Color), termCols(out, o.Cols)
		var buf strings.Builder
		for _, e := range events {
			for _, bl := range st.apply(e) {
				buf.WriteString(th.renderBlock(bl, width, false))
				buf.WriteByte('\n')
			}
		}
		if _, err := io.WriteString(out, buf.String()); err != nil {
			return 0, id, err
		}
		printed = buf.Len() > 0
	}
	// The live area must never start at the screen's top-left corner (a
	// fresh terminal, or one just cleared): the renderer redraws the whole
	// area, whenever its height changes and on exit, by moving to its top
	// row and erasing below, and tmux (scroll-on-clear, on by default)
	// takes an erase below from the home position for a clear screen and
	// scrolls the live area into its history, where stale copies of the
	// composer and status line would stay. A blank line is printed first
	// instead; it is the blank line the first printed block opens with,
	// which flush then leaves out, so the scrollback reads the same.
	blankAbove := false
	if !printed && !o.AltScreen {
		if _, err := io.WriteString(out, "\n"); err != nil {
			return 0, id, err
		}
		blankAbove = true
	}
	stream, err := b.Follow(ctx, id, st.lastSeq)
	if err != nil {
		return 0, id, fmt.Errorf("follow session %s: %w", id, err)
	}
	feed, err := b.Feed(ctx)
	if err != nil {
		stream.Close()
		return 0, id, fmt.Errorf("host feed: %w", err)
	}
	m := newModel(ctx, o, info, stream, feed)
	m.st = st
	m.blankAbove = blankAbove
	// Children the history shows running are followed, and their
	// approvals answered, as if their start had just been read.
	for run, c := range st.children {
		m.kin[c.childID] = true
		m.followed[run] = nil
		m.startCmds = append(m.startCmds, m.followChild(run, c.childID))
	}
	// Until the log names the model (its first request), the status line
	// shows the one a new session gets; a resumed session's log names its
	// own at once.
	if o.Open.Model != "" {
		m.st.setModel(o.Open.Model)
	} else if info.Turns == 0 {
		m.st.setModel(b.DefaultModel(ctx))
	}
	opts := []tea.ProgramOption{tea.WithContext(ctx)}
	if in != nil {
		opts = append(opts, tea.WithInput(in))
	}
	opts = append(opts, tea.WithOutput(out))
	if o.Cols > 0 && o.Rows > 0 {
		opts = append(opts, tea.WithWindowSize(o.Cols, o.Rows))
	}
	p := tea.NewProgram(m, opts...)
	_, runErr := p.Run()
	interrupted := ctx.Err() != nil
	// The reads in flight end with ctx; the streams are closed after.
	cancel()
	m.closeStreams()
	if runErr != nil && m.exitCode == 0 && !interrupted {
		return 1, m.id, runErr
	}
	return m.exitCode, m.id, nil
}

// termCols is the width of out when it is a terminal, else cols (or 80).
func termCols(out io.Writer, cols int) int {
	if f, ok := out.(*os.File); ok {
		if w, _, err := term.GetSize(f.Fd()); err == nil && w > 0 {
			return w
		}
	}
	if cols > 0 {
		return cols
	}
	return 80
}
