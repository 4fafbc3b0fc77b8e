package permission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
)

// TestNoSandboxBackendFailsClosed is what a platform without a sandbox
// backend (macOS: no bwrap binary, and landlock_other.go's Landlock ABI
// of 0 fails its probe) gets from the real sandbox selection: every
// sandboxed mode refuses to run the command with SANDBOX_UNAVAILABLE,
// and only full access runs it (unsupervised where the helper is not
// available, as supervisable is false there). The platform-independent
// logic runs here on Linux with the one backend that cannot work (its
// bwrap binary is missing and this test binary hosts no helper): as on a
// Mac, the selection finds no backend.
func TestNoSandboxBackendFailsClosed(t *testing.T) {
	box := sandbox.New(sandbox.NewBwrap(filepath.Join(t.TempDir(), "no-bwrap")))
	if _, err := box.Backend(); err == nil {
		t.Fatal("a missing bwrap was selected")
	}
	for _, preset := range []string{PresetReadOnly, PresetWorkspaceWrite, PresetAuto, PresetFullAccess} {
		t.Run(preset, func(t *testing.T) {
			dir := t.TempDir()
			l := newLog(t, dir)
			if err := Select(l, preset, "test"); err != nil {
				t.Fatal(err)
			}
			conf := &BashConfiner{Sandbox: box, Log: l, Grants: NewGrants()}
			reg := tool.NewRegistry()
			if err := reg.Register("", bash.New(bash.Options{Confine: conf.Confine})); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(dir, "ran")
			args, _ := json.Marshal(map[string]string{"command": "touch " + marker})
			r := tool.NewPipeline(reg).Run(context.Background(), &tool.Call{ID: "c1", Name: bash.Name, RawArguments: string(args), Cwd: dir, SessionID: l.ID()})
			_, statErr := os.Stat(marker)
			if preset == PresetFullAccess {
				if r.IsError || statErr != nil {
					t.Fatalf("full access did not run: %q, %v", resultText(r), statErr)
				}
				return
			}
			if !r.IsError || r.Error == nil || r.Error.Code != sandbox.CodeUnavailable || !strings.Contains(resultText(r), "no sandbox backend can confine commands") {
				t.Fatalf("result %+v %q; want %s saying no backend confines", r.Error, resultText(r), sandbox.CodeUnavailable)
			}
			if statErr == nil {
				t.Fatal("the command ran without a sandbox")
			}
		})
	}
}
