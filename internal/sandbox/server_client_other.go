//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"syscall"

	"github.com/dsh-dev/dsh/internal/proc"
)

// serverPlan: there is no session server off Linux (no helper).
type serverPlan struct {
	argv     []string
	procAttr func(*syscall.SysProcAttr)
}

type serverBackend interface {
	confineServed(argv []string, p Policy) (Confined, serverPlan, error)
}

func landlockPlan(string, nsMode, helperSpec) serverPlan { return serverPlan{} }

func (b *Bwrap) plan(string, []string, helperSpec) serverPlan { return serverPlan{} }

type server struct{}

func (ss *Session) run(ctx context.Context, spec proc.Spec, _ serverPlan, _ []string) (proc.Outcome, error) {
	return proc.Run(ctx, spec)
}

// Close implements the Linux Session's Close: no server to end here,
// only the session's TMPDIR to remove.
func (ss *Session) Close() error { return ss.removeTmp() }

func supervisePlan() (serverPlan, error) { return serverPlan{}, errors.New("no helper here") }
