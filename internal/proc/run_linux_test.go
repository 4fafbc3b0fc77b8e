package proc

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
)

// The command leads its own session (no controlling terminal) and its
// group, whatever the SysProcAttr hook asked for; what else the hook sets
// (here a PID namespace, as a sandbox would) takes effect.
func TestSessionAndSysProcAttrHook(t *testing.T) {
	out, err := Run(context.Background(), Spec{
		Dir:  "/",
		Argv: bash(`echo $$; cut -d' ' -f5,6 /proc/self/stat`),
		SysProcAttr: func(a *syscall.SysProcAttr) {
			a.Setpgid = true // overridden: the kit's layout wins
			a.Cloneflags = syscall.CLONE_NEWPID
		},
	})
	if err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skip("no permission for a PID namespace")
		}
		t.Fatal(err)
	}
	// In the new PID namespace bash is pid 1; /proc is still dsh's, where
	// its group and session (as cut, its child, sees them) are one id.
	f := strings.Fields(string(out.Output))
	if len(f) != 3 || f[0] != "1" || f[1] != f[2] || out.ExitCode != 0 {
		t.Fatalf("output %q, outcome %+v", out.Output, out)
	}
	out, err = Run(context.Background(), Spec{Dir: "/", Argv: bash(`echo $$; cut -d' ' -f5,6,7 /proc/$$/stat`)})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out.Output)), "\n")
	if len(lines) != 2 || lines[1] != lines[0]+" "+lines[0]+" 0" {
		t.Fatalf("want pgid = sid = pid and tty_nr 0, got %q", out.Output)
	}
	if !out.Teardown.Confirmed || len(out.Teardown.Signals) != 0 {
		t.Fatalf("teardown %+v", out.Teardown)
	}
}
