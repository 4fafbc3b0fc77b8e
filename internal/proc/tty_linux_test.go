package proc

import (
	"bytes"
	"context"
	"io"
	"syscall"
	"testing"

	"github.com/dsh-dev/dsh/internal/proc/proctest"
)

// StartTTY runs the command on the terminal (all three standard fds),
// in its own session without a controlling terminal, and Teardown ends
// its group.
func TestStartTTY(t *testing.T) {
	master, slave := proctest.OpenPTY(t, 0)
	p, err := StartTTY(context.Background(), Spec{
		Argv: []string{"sh", "-c", `test -t 0 && test -t 1 && test -t 2 && echo on-a-tty; ps -o sid=,tpgid= -p $$; echo err >&2; exec sleep 1000`},
		Dir:  t.TempDir(),
	}, slave)
	if err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for !bytes.Contains(out.Bytes(), []byte("err")) {
		n, err := master.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			t.Fatalf("read: %v (%q)", err, out.String())
		}
	}
	if !bytes.Contains(out.Bytes(), []byte("on-a-tty")) {
		t.Fatalf("not on the terminal: %q", out.String())
	}
	// tpgid -1: no controlling terminal for the command's session.
	if !bytes.Contains(out.Bytes(), []byte(" -1")) {
		t.Fatalf("the command has a controlling terminal: %q", out.String())
	}
	if err := p.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("signal 0: %v", err)
	}
	res := p.Teardown(context.Background())
	if !res.Confirmed {
		t.Fatalf("teardown: %+v", res)
	}
	if info, _ := p.Wait(); !info.Signaled {
		t.Fatalf("exit %+v", info)
	}
	// Every copy of the slave is gone with the group: the master sees the
	// hang-up once the kept output is read.
	_, _ = io.Copy(io.Discard, master)
	if _, err := StartTTY(context.Background(), Spec{Argv: []string{"true"}, Dir: t.TempDir(), Stdin: bytes.NewReader(nil)}, master); err == nil {
		t.Fatal("Spec.Stdin was accepted")
	}
}
