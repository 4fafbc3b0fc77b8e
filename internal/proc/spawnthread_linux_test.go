package proc

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// TestChildOutlivesRetiredThread: a peer started from a goroutine whose
// thread the runtime then retires (locked, never unlocked) keeps running;
// its Pdeathsig belongs to the spawn thread, which lives as long as dsh.
// Before the spawn thread, the peer was killed with SIGKILL right away.
func TestChildOutlivesRetiredThread(t *testing.T) {
	dir := t.TempDir()
	started := make(chan *Process, 1)
	errs := make(chan error, 1)
	var start func()
	start = func() {
		runtime.LockOSThread()
		if syscall.Gettid() == os.Getpid() {
			// The main thread is parked, not retired, when its locked
			// goroutine ends: try again on another thread.
			runtime.UnlockOSThread()
			go start()
			return
		}
		// Never unlocked: the thread ends with this goroutine.
		p, err := Start(context.Background(), Spec{Argv: []string{"sleep", "1000.5150"}, Dir: dir})
		if err != nil {
			errs <- err
			return
		}
		started <- p
	}
	go start()
	var p *Process
	select {
	case p = <-started:
	case err := <-errs:
		t.Fatal(err)
	}
	defer p.Teardown(context.Background())
	// The retired thread's exit follows at once; a child it took along
	// would be gone well within this wait, which normally runs out.
	if proctest.WaitExit(p.Pid(), 2*time.Second) {
		info, _ := p.Wait()
		t.Fatalf("the child died (%+v) when the thread that asked for it was retired", info)
	}
}
