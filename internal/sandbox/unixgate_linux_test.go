//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireGate(t testing.TB) {
	t.Helper()
	if err := unixGateSupported(); err != nil {
		t.Skipf("no UNIX socket gate here: %v", err)
	}
}

// sockServer is a UNIX socket server in the test process: it counts
// connections (or datagrams) and collects what they carried.
type sockServer struct {
	path string
	mu   sync.Mutex
	cond *sync.Cond // broadcast on each message
	msgs []string
}

func newSockServer(path string) *sockServer {
	s := &sockServer{path: path}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *sockServer) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

func (s *sockServer) add(m string) {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	s.cond.Broadcast()
}

// wait blocks until s has n messages: a stream server records a
// connection after reading it, which can be after the client exited.
func (s *sockServer) wait(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.msgs) < n {
		s.cond.Wait()
	}
}

// serveStream listens on path; each connection's first line (or a
// passed descriptor's content) is recorded before the client's exit is
// reported, because the client writes before it exits and the test reads
// got() only after the client is done and the connection drained.
func serveStream(t testing.TB, path string) *sockServer {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSockServer(path)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				s.add(readConn(c))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

// readConn reads a connection's message: a line, or a passed pipe's
// content.
func readConn(c *net.UnixConn) string {
	buf, oob := make([]byte, 64), make([]byte, 64)
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil && n == 0 {
		return "(empty)"
	}
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil && len(msgs) == 1 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
				f := os.NewFile(uintptr(fds[0]), "passed")
				defer f.Close()
				b, _ := io.ReadAll(f)
				return "fd:" + string(b)
			}
		}
	}
	line, _ := bufio.NewReader(io.MultiReader(strings.NewReader(string(buf[:n])), c)).ReadString('\n')
	return strings.TrimSpace(line)
}

// serveDgram binds a datagram socket at path and records what arrives.
func serveDgram(t testing.TB, path string) *sockServer {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSockServer(path)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			n, _, err := c.ReadFromUnix(buf)
			if err != nil {
				return
			}
			s.add(string(buf[:n]))
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return s
}

// gateRun runs the test binary as a client under the gate alone (no
// Landlock) and returns its exit code, output and the refusals reported.
func gateRun(t testing.TB, g gateSpec, dir string, args ...string) (int, string, []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	child, err := forkGated(gatedStart{
		path: self, argv: append([]string{self, gateClientArg}, args...), env: os.Environ(), dir: dir,
		files: []uintptr{0, w.Fd(), w.Fd()},
	})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []string
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serveUnixGate(ctx, child, g, func(p string) {
			mu.Lock()
			refused = append(refused, p)
			mu.Unlock()
		})
	}()
	out, _ := io.ReadAll(r)
	ws := <-child.done
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return ws.ExitStatus(), string(out), refused
}

// gateFixture is a root the gate allows beside an outside dir, each with
// a stream and a datagram server.
type gateFixture struct {
	in, out          string
	inS, outS        *sockServer
	inD, outD        *sockServer
	allowedS         *sockServer
	abstract         *sockServer
	spec             gateSpec
	allowedDir, link string
}

func newGateFixture(t testing.TB) gateFixture {
	t.Helper()
	root, err := resolvePath("/", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := gateFixture{in: filepath.Join(root, "in"), out: filepath.Join(root, "out"), allowedDir: filepath.Join(root, "agent")}
	for _, d := range []string{f.in, f.out, f.allowedDir} {
		mustMkdir(t, d)
	}
	f.inS = serveStream(t, filepath.Join(f.in, "s"))
	f.outS = serveStream(t, filepath.Join(f.out, "s"))
	f.inD = serveDgram(t, filepath.Join(f.in, "d"))
	f.outD = serveDgram(t, filepath.Join(f.out, "d"))
	f.allowedS = serveStream(t, filepath.Join(f.allowedDir, "sock"))
	f.abstract = serveStream(t, "@dsh-gate-test-"+filepath.Base(root)+strings.ReplaceAll(t.Name(), "/", "_"))
	f.link = filepath.Join(f.in, "link")
	if err := os.Symlink(f.outS.path, f.link); err != nil {
		t.Fatal(err)
	}
	f.spec = gateSpec{Roots: []string{f.in}, Sockets: []string{f.allowedS.path}}
	return f
}

func TestUnixGate(t *testing.T) {
	requireGate(t)
	f := newGateFixture(t)
	port := listen(t)
	tests := []struct {
		name    string
		dir     string
		args    []string
		ok      bool
		refused string      // the path reported, when refused
		server  *sockServer // receives want when ok
		want    []string
	}{
		{"inside", "/", []string{"connect", f.inS.path}, true, "", f.inS, []string{"hello"}},
		{"outside", "/", []string{"connect", f.outS.path}, false, f.outS.path, f.outS, nil},
		{"allowed socket", "/", []string{"connect", f.allowedS.path}, true, "", f.allowedS, []string{"hello"}},
		{"symlink inside to outside", "/", []string{"connect", f.link}, false, f.outS.path, f.outS, nil},
		{"relative inside", f.in, []string{"connect", "s"}, true, "", f.inS, []string{"hello"}},
		{"relative escaping", f.in, []string{"connect", "../out/s"}, false, f.outS.path, f.outS, nil},
		{"magic link", "/", []string{"connect", "/proc/self/cwd/s"}, false, "/proc/self/cwd/s", nil, nil},
		{"missing", "/", []string{"connect", filepath.Join(f.in, "nope")}, false, "", nil, nil},
		{"sendto inside", "/", []string{"sendto", f.inD.path}, true, "", f.inD, []string{"sendto"}},
		{"sendto outside", "/", []string{"sendto", f.outD.path}, false, f.outD.path, f.outD, nil},
		{"sendmsg inside", "/", []string{"sendmsg", f.inD.path}, true, "", f.inD, []string{"sendmsg"}},
		{"sendmsg outside", "/", []string{"sendmsg", f.outD.path}, false, f.outD.path, f.outD, nil},
		{"sendmmsg outside", "/", []string{"sendmmsg", f.outD.path}, false, f.outD.path, f.outD, nil},
		{"descriptor passing", "/", []string{"rights", f.inS.path}, true, "", f.inS, []string{"fd:piped"}},
		{"tcp", "/", []string{"tcp", port}, true, "", nil, nil},
		{"abstract passes", "/", []string{"abstract", f.abstract.path[1:]}, true, "", f.abstract, []string{"hello"}},
		{"abstract inside", "/", []string{"selfabstract"}, true, "", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before int
			if tc.server != nil {
				before = len(tc.server.got())
			}
			code, out, refused := gateRun(t, f.spec, tc.dir, tc.args...)
			if (code == 0) != tc.ok {
				t.Fatalf("exit %d, output %q; want success=%v", code, out, tc.ok)
			}
			if !tc.ok && tc.refused != "" && !strings.HasPrefix(out, "EACCES") {
				t.Errorf("output %q, want EACCES", out)
			}
			if tc.refused != "" && !slices.Equal(refused, []string{tc.refused}) {
				t.Errorf("reported %q, want %q", refused, tc.refused)
			}
			if tc.refused == "" && len(refused) != 0 {
				t.Errorf("reported %q, want nothing", refused)
			}
			if tc.server != nil {
				tc.server.wait(before + len(tc.want))
				if got := tc.server.got()[before:]; !slices.Equal(got, tc.want) {
					t.Errorf("server got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestUnixGateSendmmsg(t *testing.T) {
	requireGate(t)
	f := newGateFixture(t)
	code, out, _ := gateRun(t, f.spec, "/", "sendmmsg", f.inD.path)
	if code != 0 || strings.TrimSpace(out) != "ok 2 3 3" {
		t.Fatalf("exit %d, output %q; want both datagrams sent with their lengths", code, out)
	}
	f.inD.wait(2)
	if got := f.inD.got(); !slices.Equal(got, []string{"one", "two"}) {
		t.Errorf("got %q", got)
	}
}

// The address is read once and the call made with what was checked: a
// thread rewriting the path during connect never reaches outside.
func TestUnixGateRace(t *testing.T) {
	requireGate(t)
	f := newGateFixture(t)
	code, out, _ := gateRun(t, f.spec, "/", "race", f.inS.path, f.outS.path, "400")
	if code != 0 || !strings.HasPrefix(out, "ok ") {
		t.Fatalf("exit %d, output %q", code, out)
	}
	if got := f.outS.got(); len(got) != 0 {
		t.Fatalf("the outside server was reached %d times", len(got))
	}
}

// A gate whose command is gone stops serving; a cancelled one too.
func TestUnixGateStops(t *testing.T) {
	requireGate(t)
	code, _, _ := gateRun(t, gateSpec{}, "/", "tcp", listen(t))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, err := forkGated(gatedStart{path: "/nonexistent", argv: []string{"/nonexistent"}})
	if !errors.Is(err, unix.ENOENT) {
		t.Fatalf("forkGated of a missing command: %v", err)
	}
}

// The refusals above are the gate's: with every path allowed the same
// clients reach the outside servers.
func TestUnixGateControl(t *testing.T) {
	requireGate(t)
	f := newGateFixture(t)
	all := gateSpec{Roots: []string{"/"}}
	for _, args := range [][]string{{"connect", f.outS.path}, {"connect", f.link}, {"sendto", f.outD.path}} {
		if code, out, refused := gateRun(t, all, "/", args...); code != 0 || len(refused) != 0 {
			t.Errorf("%q: exit %d, output %q, refused %q", args, code, out, refused)
		}
	}
	f.outS.wait(2)
	f.outD.wait(1)
}

// Every goroutine the gate starts ends once its command is gone: the
// serving loop, the calls, the confining thread, the reaper and the
// listener's closer.
func TestUnixGateNoLeaks(t *testing.T) {
	requireGate(t)
	f := newGateFixture(t)
	for _, args := range [][]string{{"connect", f.inS.path}, {"connect", f.outS.path}, {"sendmmsg", f.inD.path}, {"selfabstract"}} {
		gateRun(t, f.spec, "/", args...)
	}
	idle := make(chan struct{})
	go func() {
		gateRoutines.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("gate goroutines still running:\n%s", buf[:runtime.Stack(buf, true)])
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, fn := range []string{"serveUnixGate", "forkGated", "(*gate).answer"} {
		if strings.Contains(stacks, "sandbox."+fn) {
			t.Errorf("a goroutine is left in %s:\n%s", fn, stacks)
		}
	}
}

// threadGroup, the fallback before PIDFD_THREAD, finds a thread's process.
func TestThreadGroup(t *testing.T) {
	tids := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
	}()
	for _, tid := range []int{os.Getpid(), <-tids} {
		if got, err := threadGroup(tid); err != nil || got != os.Getpid() {
			t.Errorf("threadGroup(%d) = %d, %v; want %d", tid, got, err, os.Getpid())
		}
	}
	if _, err := threadGroup(-1); err == nil {
		t.Error("threadGroup(-1) succeeded")
	}
}
