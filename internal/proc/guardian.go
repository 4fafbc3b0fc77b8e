package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// guardianScript is the guardian's program (see the package comment). It
// reads "+ <pgid>" and "- <pgid>" lines, keeping the set of guarded groups
// in g as " 1 2 3 ", and ends every group still in it when its stdin
// reaches EOF, that is when dsh is gone: TERM, then KILL a second later.
// The grace is for the sandbox helper (internal/sandbox) that leads a
// group without a PID namespace: its death signal tells it to kill the
// processes that left its group (setsid, double forks), and an immediate
// SIGKILL of its group would kill it first and orphan them. It ignores the signals a terminal
// or a careless "kill" would send. dash's kill takes no "--"; a negative
// pgid is read as a group all the same.
const guardianScript = `trap '' TERM INT HUP
g=' '
while read -r op pg; do
	case $op in
	+) g="$g$pg " ;;
	-) case $g in *" $pg "*) g="${g%% $pg *} ${g#* $pg }" ;; esac ;;
	esac
done
[ "$g" = ' ' ] && exit
for pg in $g; do kill -TERM -"$pg"; done
sleep 1
for pg in $g; do kill -KILL -"$pg"; done`

// guardian is dsh's one guardian process, shared by every group the kit
// starts: one long-lived shell instead of one per child keeps a run's
// cost to the command itself.
type guardian struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	w    *os.File         // the only write end of its stdin, close-on-exec
	live map[int]struct{} // groups registered and not yet released
}

var theGuardian guardian

// add registers pgid. When the guardian is not running (first use, or it
// was killed), a new one is started and told every live group again.
func (gd *guardian) add(pgid int) error {
	gd.mu.Lock()
	defer gd.mu.Unlock()
	if gd.live == nil {
		gd.live = map[int]struct{}{}
	}
	gd.live[pgid] = struct{}{}
	if gd.cmd != nil && gd.write('+', pgid) == nil {
		return nil
	}
	// Not running, or the write failed (EPIPE: it died): start afresh.
	if err := gd.restart(); err != nil {
		delete(gd.live, pgid)
		return err
	}
	return nil
}

// remove unregisters pgid; the caller is about to reap its leader. A
// failed write is left alone: the next add restarts the guardian with
// the live set, which no longer holds pgid.
func (gd *guardian) remove(pgid int) {
	gd.mu.Lock()
	defer gd.mu.Unlock()
	delete(gd.live, pgid)
	if gd.cmd != nil {
		_ = gd.write('-', pgid)
	}
}

// write sends one line; lines are far below PIPE_BUF, so each is written
// whole. Callers hold mu.
func (gd *guardian) write(op byte, pgid int) error {
	_, err := gd.w.Write(append(strconv.AppendInt([]byte{op, ' '}, int64(pgid), 10), '\n'))
	return err
}

// restart replaces the guardian and registers every live group with the
// new one. Callers hold mu.
func (gd *guardian) restart() error {
	if gd.cmd != nil {
		// Closing its stdin makes a live one kill the groups it knows,
		// which are all still live: kill it first instead.
		_ = gd.cmd.Process.Kill()
		_ = gd.cmd.Wait()
		gd.w.Close()
		gd.cmd, gd.w = nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("proc: guardian pipe: %w", err)
	}
	// No Pdeathsig: it must outlive dsh to do its job. Its own session,
	// so that no terminal signal reaches it, and cwd "/" so that it pins
	// no directory.
	cmd := exec.Command("/bin/sh", "-c", guardianScript)
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("proc: start guardian: %w", err)
	}
	gd.cmd, gd.w = cmd, w
	for pg := range gd.live {
		if err := gd.write('+', pg); err != nil {
			return fmt.Errorf("proc: arm guardian: %w", err)
		}
	}
	return nil
}

// pid returns the guardian's pid, 0 when none runs (for tests).
func (gd *guardian) pid() int {
	gd.mu.Lock()
	defer gd.mu.Unlock()
	if gd.cmd == nil {
		return 0
	}
	return gd.cmd.Process.Pid
}
