//go:build linux

package permission

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/tool"
	fstools "github.com/dsh-dev/dsh/internal/tools/fs"
	"github.com/dsh-dev/dsh/internal/tools/search"
	"github.com/dsh-dev/dsh/internal/tools/strreplace"
)

// raceRig is a workspace beside an outside directory, the real file
// tools behind the real guards, fenced with the same policy function.
type raceRig struct {
	root, ws, outside string
	policy            sandbox.Policy
	pipe              *tool.Pipeline
}

func newRaceRig(t *testing.T, p sandbox.Policy) *raceRig {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &raceRig{root: root, ws: filepath.Join(root, "ws"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{r.ws, r.outside, filepath.Join(r.ws, "in")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.Workspace = r.ws
	r.policy = p
	r.pipe = fileTools(func(*tool.Call) sandbox.Policy { return r.policy }, true)
	return r
}

// fileTools is the file tools applying policy themselves, behind the
// write and read fences (guards) when guards is set.
func fileTools(policy func(*tool.Call) sandbox.Policy, guards bool) *tool.Pipeline {
	tracker := fstools.NewTracker()
	reg := tool.NewRegistry()
	images := func(*tool.Call) bool { return true }
	defs := append(fstools.Tools(fstools.Options{Tracker: tracker, Policy: policy, Images: images}),
		strreplace.New(strreplace.Options{Tracker: tracker, Policy: policy}),
		search.NewGrep(search.Options{Policy: policy}), search.NewGlob(search.Options{Policy: policy}))
	for _, d := range defs {
		if err := reg.Register("", d); err != nil {
			panic(err)
		}
	}
	pipe := tool.NewPipeline(reg)
	if guards {
		pipe.UseGuard(WriteFence(sandbox.Policy.CheckWrite, policy))
		pipe.UseGuard(ReadFence(sandbox.Policy.CheckRead, policy))
	}
	return pipe
}

func (r *raceRig) run(name string, args map[string]any) tool.Result {
	raw, _ := json.Marshal(args)
	return r.pipe.Run(context.Background(), &tool.Call{ID: "c", Name: name, RawArguments: string(raw), Cwd: r.ws, SessionID: "s"})
}

// flip starts script as a confined background job in the workspace under
// backend b (workspace-write, as a model's run_in_background command
// runs) and returns once it printed "ready"; the job is killed, and
// waited for, when the test ends.
func flip(t *testing.T, b sandbox.Backend, ws, script string) {
	t.Helper()
	startJob(t, b, ws, []string{"bash", "-c", script})
}

// startJob starts argv confined in workspace-write under b, in ws, and
// returns once it printed "ready".
func startJob(t *testing.T, b sandbox.Backend, ws string, argv []string) {
	t.Helper()
	conf, err := b.Confine(argv, sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(conf.Argv[0], conf.Argv[1:]...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), conf.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if conf.ProcAttr != nil {
		conf.ProcAttr(cmd.SysProcAttr)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("the flipping job did not start under %s: %q %v", b.Name(), line, err)
	}
}

// flipDir is the attack of issue 24 (finding 5): a workspace
// subdirectory d flipping between a symlink to a directory inside and
// one to a directory outside.
func flipDir(outside string) string {
	return fmt.Sprintf(`ln -sfn in d; echo ready
while :; do ln -sfn in d.tmp && mv -T d.tmp d; ln -sfn %q d.tmp && mv -T d.tmp d; done`, outside)
}

// flipperEnv names the two symlinks the test binary, started as a
// confined job with it set, swaps forever (see runFlipper).
const flipperEnv = "DSH_TEST_FLIPPER"

// runFlipper is the fast form of the attack: when the binary runs as the
// flipping job it exchanges two symlinks in its working directory with
// renameat2(RENAME_EXCHANGE) in a tight loop, so the name flips between
// inside and outside thousands of times per file-tool call, not a few.
func runFlipper() {
	names := strings.Split(os.Getenv(flipperEnv), ",")
	if len(names) != 2 {
		return
	}
	os.Stdout.WriteString("ready\n")
	for {
		if err := unix.Renameat2(unix.AT_FDCWD, names[0], unix.AT_FDCWD, names[1], unix.RENAME_EXCHANGE); err != nil {
			fmt.Fprintln(os.Stderr, "flipper:", err)
			os.Exit(1)
		}
	}
}

// flipFast starts the fast flipper in ws under b: d alternates between a
// symlink to in and one to outside.
func flipFast(t *testing.T, b sandbox.Backend, ws, outside string) {
	t.Helper()
	flipLink(t, b, ws, "d", "in", outside)
}

// flipLink starts the fast flipper in ws under b: name alternates
// between a symlink to one and a symlink to other.
func flipLink(t *testing.T, b sandbox.Backend, ws, name, one, other string) {
	t.Helper()
	if err := os.Symlink(one, filepath.Join(ws, name)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, filepath.Join(ws, name+".x")); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(flipperEnv, name+","+name+".x")
	startJob(t, b, ws, []string{exe})
}

// raceBackends runs f under each real backend that works here.
func raceBackends(t *testing.T, f func(t *testing.T, b sandbox.Backend)) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	for _, b := range []sandbox.Backend{sandbox.NewBwrap(""), sandbox.NewLandlock("")} {
		t.Run(b.Name(), func(t *testing.T) {
			if err := b.Probe(); err != nil {
				t.Skipf("%s unavailable: %v", b.Name(), err)
			}
			f(t, b)
		})
	}
}

// TestFileToolsWriteRace is finding 5 of issue 24 driven as it was
// found: a sandboxed background job flips a workspace subdirectory
// between a symlink inside and one outside while write, edit and
// str_replace_based_edit_tool (behind the real write fence) write to
// d/NAME. No file may land outside, under either backend; some writes
// must be refused and some must succeed, or the race was not run.
func TestFileToolsWriteRace(t *testing.T) {
	calls := map[string]int{"write": 4000, "edit": 1000, strreplace.Name: 1000}
	if testing.Short() {
		calls = map[string]int{"write": 400, "edit": 100, strreplace.Name: 100}
	}
	raceBackends(t, func(t *testing.T, b sandbox.Backend) {
		for _, job := range []string{"shell", "fast"} {
			t.Run(job, func(t *testing.T) {
				r := newRaceRig(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite})
				if job == "shell" {
					flip(t, b, r.ws, flipDir(r.outside))
				} else {
					flipFast(t, b, r.ws, r.outside)
				}
				writeRace(t, r, b.Name()+"/"+job, calls)
			})
		}
	})
}

// writeRace makes the calls, each a new file d/NAME, and requires none
// of them outside. A loaded machine may not schedule the job for a
// while, so it goes on past the count until both outcomes (written and
// refused) were seen, within a bound: otherwise the race did not run.
func writeRace(t *testing.T, r *raceRig, job string, calls map[string]int) {
	t.Helper()
	for _, name := range []string{"write", "edit", strreplace.Name} {
		n := calls[name]
		ok, refused, last := 0, 0, ""
		i := 0
		for ; i < n || (ok == 0 || refused == 0) && i < 10*n; i++ {
			f := fmt.Sprintf("d/%s-%d", name, i)
			var res tool.Result
			switch name {
			case "write":
				res = r.run(name, map[string]any{"file_path": f, "content": "owned\n"})
			case "edit":
				res = r.run(name, map[string]any{"file_path": f, "old_string": "", "new_string": "owned\n"})
			default:
				res = r.run(name, map[string]any{"command": "create", "path": f, "file_text": "owned\n"})
			}
			if res.IsError {
				last = res.Error.Message
				refused++
			} else {
				ok++
			}
		}
		landed, _ := filepath.Glob(filepath.Join(r.outside, "*"))
		t.Logf("%s under %s: %d calls, %d written, %d refused, %d outside", name, job, i, ok, refused, len(landed))
		if len(landed) > 0 {
			t.Fatalf("%s: %d of %d calls wrote outside the workspace (%s, ...)", name, len(landed), i, landed[0])
		}
		if ok == 0 || refused == 0 {
			t.Fatalf("%s: %d written, %d refused: the race did not run (last refusal: %s)", name, ok, refused, last)
		}
	}
}

// TestFileToolsWriteRaceProtected flips d between a directory inside
// and the workspace's own .git/hooks: beneath the workspace, so only
// the check of the opened directory's real name (CheckWrite on it, not
// on the path) keeps the writes out of the protected metadata.
func TestFileToolsWriteRaceProtected(t *testing.T) {
	calls := map[string]int{"write": 2000, "edit": 200, strreplace.Name: 200}
	if testing.Short() {
		calls = map[string]int{"write": 200, "edit": 20, strreplace.Name: 20}
	}
	raceBackends(t, func(t *testing.T, b sandbox.Backend) {
		r := newRaceRig(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite})
		hooks := filepath.Join(r.ws, ".git", "hooks")
		if err := os.MkdirAll(hooks, 0o755); err != nil {
			t.Fatal(err)
		}
		// The rig counts what lands in r.outside.
		r.outside = hooks
		flipLink(t, b, r.ws, "d", "in", ".git/hooks")
		writeRace(t, r, b.Name()+"/.git", calls)
	})
}
