package proc

import (
	"os/exec"
	"runtime"
	"sync"
)

// The parent-death signal (Pdeathsig) fires when the *thread* that forked
// a child ends, not when the process does. The Go runtime retires a
// thread whenever a goroutine that locked it (runtime.LockOSThread, as the
// sandbox's probes and supervisors do) ends without unlocking it, and the
// thread that forked a long-lived peer (an MCP server, a language server)
// can be one of those later: the peer was then killed with SIGKILL in the
// middle of the session. Every command therefore starts on one thread that
// stays locked for the life of the process, so the signal fires only when
// dsh itself dies.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startCmd runs cmd.Start on the spawn thread.
func startCmd(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go spawnLoop(spawner.reqs)
	})
	r := spawnReq{cmd: cmd, done: make(chan error, 1)}
	spawner.reqs <- r
	return <-r.done
}

// spawnLoop is the spawn thread: it lives as long as the process (the
// leak checker knows it).
func spawnLoop(reqs <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked: see spawner
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}
