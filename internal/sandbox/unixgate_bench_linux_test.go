//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkUnixConnect measures what the gate adds to a connect(2) (and
// the write after it): one client process connects b.N times to a
// socket in the workspace, directly and under each backend. The client's
// start is included but amortised over b.N.
func BenchmarkUnixConnect(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	root, _ := testRoot(b)
	s := serveStream(b, filepath.Join(root, "s"))
	_ = s
	runLoop := func(b *testing.B, c Confined) {
		b.ResetTimer()
		code, out := run(b, Confined{Argv: append(c.Argv, strconv.Itoa(b.N))}, root)
		if code != 0 {
			b.Fatalf("exit %d: %s", code, out)
		}
	}
	args := []string{self, gateClientArg, "loop", filepath.Join(root, "s")}
	b.Run("direct", func(b *testing.B) { runLoop(b, Unconfined(args)) })
	for _, be := range realBackends() {
		b.Run(be.Name(), func(b *testing.B) {
			requireWorking(b, be)
			c, err := be.Confine(args, Policy{Mode: WorkspaceWrite, Workspace: root})
			if err != nil {
				b.Fatal(err)
			}
			runLoop(b, c)
		})
	}
}
