//go:build linux

package cli_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/internal/sandbox"
)

// Knobs of the crash test, read from the environment.
const (
	crashSeedEnv     = "DSH_CRASH_SEED"     // master seed; printed on failure
	crashRunsEnv     = "DSH_CRASH_RUNS"     // number of runs (default 50, 12 with -short)
	crashOnlyEnv     = "DSH_CRASH_ONLY"     // run only these run indexes ("3,17")
	crashParallelEnv = "DSH_CRASH_PARALLEL" // runs at once (default 4)
)

const (
	// survivorGrace bounds how long the processes of a killed run may
	// take to die. The kernel delivers the parent-death signals at once;
	// this only absorbs scheduling delay on a loaded machine.
	survivorGrace = 5 * time.Second
	// runDeadline bounds one run: a run that neither ends nor reaches its
	// kill point by then is killed and reported as a hang.
	runDeadline = 30 * time.Second
)

// Markers the fake model routes requests by.
const (
	parentMark = "PARENTTASK"
	childMark  = "CHILDTASK"
	resumeMark = "RESUMETASK"
	resumeText = "resumed after the crash"
)

// TestCrashRandomKill9 kills real `dsh run` processes with SIGKILL at
// random moments of realistic sessions (parallel tool calls, bash
// commands that start setsid, nohup and double-forked processes, a
// background job, a subagent that runs bash itself, multi-step turns,
// streamed answers) and checks, for every run:
//   - nothing the run started is alive shortly after dsh died;
//   - the database passes PRAGMA integrity_check and foreign_key_check;
//   - every session log reopens and, repaired, is balanced with each
//     tool/call paired with exactly one tool/result and vice versa;
//   - `dsh run --resume` continues the session, leaving a balanced log.
//
// Runs are drawn from a seed (DSH_CRASH_SEED reproduces the plans; the
// timing of a kill is still the machine's). DSH_SANDBOX_BACKENDS is
// passed to dsh, so `DSH_SANDBOX_BACKENDS=landlock` runs it under Landlock.
func TestCrashRandomKill9(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", crashSeedEnv, s, err)
		}
		seed = v
	}
	runs := envInt(t, crashRunsEnv, 50)
	if testing.Short() && os.Getenv(crashRunsEnv) == "" {
		runs = 12
	}
	parallel := max(1, envInt(t, crashParallelEnv, 4))
	sandboxed := true
	if _, err := sandbox.Default().Backend(); err != nil {
		sandboxed = false
		t.Logf("no sandbox backend (%v): every run uses full-access", err)
	}
	t.Logf("%s=%d, %d runs, %d at once, %s=%q", crashSeedEnv, seed, runs, parallel, "DSH_SANDBOX_BACKENDS", os.Getenv("DSH_SANDBOX_BACKENDS"))

	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	plans := make([]*crashPlan, runs)
	for i := range plans {
		plans[i] = newCrashPlan(rng, seed, i, sandboxed)
	}
	if only := os.Getenv(crashOnlyEnv); only != "" {
		var keep []*crashPlan
		for _, s := range strings.Split(only, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || i < 0 || i >= runs {
				t.Fatalf("%s=%q: bad run index %q", crashOnlyEnv, only, s)
			}
			keep = append(keep, plans[i])
		}
		plans = keep
	}

	tally := &crashTally{fails: map[string][]int{}, phases: map[string]int{}}
	work := make(chan *crashPlan)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for p := range work {
				t.Run(fmt.Sprintf("run%02d", p.index), func(t *testing.T) { p.run(t, tally) })
			}
		})
	}
	for _, p := range plans {
		work <- p
	}
	close(work)
	wg.Wait()
	t.Log(tally.summary(len(plans), seed))
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return v
}

// crashTally counts, per assertion, the runs that broke it.
type crashTally struct {
	mu                        sync.Mutex
	fails                     map[string][]int
	phases                    map[string]int
	killed, finished, noStore int
}

func (c *crashTally) count(field *int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*field++
}

func (c *crashTally) phase(ph string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phases[ph]++
}

func (c *crashTally) add(category string, run int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.fails[category], run) {
		c.fails[category] = append(c.fails[category], run)
	}
}

func (c *crashTally) summary(runs int, seed uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "crash summary (%s=%d): %d runs, %d killed, %d finished before their kill point, %d killed before the store had a session",
		crashSeedEnv, seed, runs, c.killed, c.finished, c.noStore)
	phases := make([]string, 0, len(c.phases))
	for k := range c.phases {
		phases = append(phases, k)
	}
	slices.Sort(phases)
	b.WriteString("\n  where the kills landed (from the stored logs):")
	for _, k := range phases {
		fmt.Fprintf(&b, "\n    %3d  %s", c.phases[k], k)
	}
	cats := make([]string, 0, len(c.fails))
	for k := range c.fails {
		cats = append(cats, k)
	}
	slices.Sort(cats)
	for _, k := range cats {
		slices.Sort(c.fails[k])
		fmt.Fprintf(&b, "\n  %-28s %2d/%d runs: %v", k, len(c.fails[k]), runs, c.fails[k])
	}
	if len(cats) == 0 {
		b.WriteString("\n  every assertion held in every run")
	}
	return b.String()
}

// Kill point kinds.
const (
	killAfterDelay  = "delay"  // a random time after start
	killAfterEvents = "events" // after the N-th event streamed by --json
	killAfterMarker = "marker" // when a command reports a point of its run
)

// crashPlan is one run: the session the fake model scripts and where
// the kill lands.
type crashPlan struct {
	index  int
	seed   uint64
	preset string // workspace-write (sandboxed) or full-access
	// step1 are the first step's parallel calls: bash commands by tag
	// ("setsid", "nohup", "dfork", "group") and the read-only "read" and
	// "glob".
	step1 []string
	job   bool   // step 2 starts a background bash job
	child string // step 2 delegates: "" none, "spawn" continuable, "background" one-shot job
	// Stream shape of every answer.
	chunkRunes int
	chunkDelay time.Duration

	kill      string
	killDelay time.Duration
	killAt    int    // events
	killTag   string // marker
}

func newCrashPlan(rng *rand.Rand, seed uint64, i int, sandboxed bool) *crashPlan {
	p := &crashPlan{index: i, seed: seed, preset: "workspace-write"}
	if !sandboxed || rng.IntN(3) == 0 {
		p.preset = "full-access"
	}
	pool := []string{"setsid", "nohup", "dfork", "group", "read", "glob"}
	rng.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
	p.step1 = pool[:2+rng.IntN(len(pool)-1)]
	p.job = rng.IntN(3) != 0
	p.child = []string{"", "spawn", "spawn", "background"}[rng.IntN(4)]
	p.chunkRunes = 3 + rng.IntN(10)
	p.chunkDelay = time.Duration(rng.IntN(3)) * time.Millisecond
	switch rng.IntN(3) {
	case 0:
		p.kill, p.killDelay = killAfterDelay, time.Duration(rng.IntN(1500))*time.Millisecond
	case 1:
		p.kill, p.killAt = killAfterEvents, 1+rng.IntN(400)
	default:
		tags := p.tags()
		p.kill, p.killTag = killAfterMarker, tags[rng.IntN(len(tags))]
		p.killDelay = time.Duration(rng.IntN(40)) * time.Millisecond
	}
	return p
}

// tags returns the marker tags the run's commands report.
func (p *crashPlan) tags() []string {
	var out []string
	for _, s := range p.step1 {
		if s != "read" && s != "glob" {
			out = append(out, s)
		}
	}
	if p.job {
		out = append(out, "job", "job-done")
	}
	if p.child != "" {
		out = append(out, "child-setsid", "child-dfork", "child-s2")
	}
	return append(out, "s3")
}

// pidTags returns the tags under which a run that is not killed records
// the pids of the processes it starts.
func (p *crashPlan) pidTags() []string {
	var out []string
	for _, s := range p.step1 {
		if s != "read" && s != "glob" {
			out = append(out, s)
		}
	}
	if p.job {
		out = append(out, "job-setsid")
	}
	if p.child != "" {
		out = append(out, "child-setsid", "child-dfork")
	}
	return out
}

func (p *crashPlan) String() string {
	k := p.kill + " "
	switch p.kill {
	case killAfterDelay:
		k += p.killDelay.String()
	case killAfterEvents:
		k += strconv.Itoa(p.killAt)
	default:
		k += p.killTag + "+" + p.killDelay.String()
	}
	return fmt.Sprintf("run %d (%s=%d %s=%d): %s, step1 %v, job %v, child %q, chunks %d runes/%v, kill %s",
		p.index, crashSeedEnv, p.seed, crashOnlyEnv, p.index, p.preset, p.step1, p.job, p.child, p.chunkRunes, p.chunkDelay, k)
}

// crashCmds builds the scripted bash commands of one run. Every command
// exports the run's marker, so its descendants are recognisable after
// dsh is dead, records the pids it starts, and reports its tag on the
// FIFO (the marker kill point).
type crashCmds struct{ marker, pids, fifo string }

// The command goes on a little after reporting, so that marker kills
// land inside the tool call as well as after it.
func (c crashCmds) wrap(tag, body string) string {
	return fmt.Sprintf("export %s; %s; echo %s > %s; sleep 0.05; echo %s done", c.marker, body, tag, c.fifo, tag)
}

// spawn is a body that starts a long sleep the way kind says and
// records its pid under tag.
func (c crashCmds) spawn(kind, tag string) string {
	const quiet = "</dev/null >/dev/null 2>&1"
	switch kind {
	case "setsid":
		return fmt.Sprintf("setsid sleep 1000 %s & echo \"%s $!\" >> %s", quiet, tag, c.pids)
	case "nohup":
		return fmt.Sprintf("nohup sleep 1000 %s & echo \"%s $!\" >> %s", quiet, tag, c.pids)
	case "dfork":
		// A subshell starts the sleep and exits, orphaning it; it records
		// the pid before exiting, so the record cannot be lost.
		return fmt.Sprintf("(sleep 1000 %s & echo \"%s $!\" >> %s)", quiet, tag, c.pids)
	default: // "group": a plain background child in the command's group
		return fmt.Sprintf("sleep 1000 %s & echo \"%s $!\" >> %s; sleep 0.1", quiet, tag, c.pids)
	}
}

func bashArgs(cmd string, background bool) llmtest.ToolCall {
	args := map[string]any{"command": cmd, "description": "crash test"}
	if background {
		args["run_in_background"] = true
	}
	return toolCall("bash", args)
}

// respond is the fake model: stateless, it routes by the markers in the
// request and by how many tool results the conversation already has.
func (p *crashPlan) respond(c crashCmds, r llmtest.Request) llmtest.Response {
	body := string(r.Body)
	n := r.ToolResultCount()
	resp := llmtest.Response{ChunkRunes: p.chunkRunes, DelayPerChunk: p.chunkDelay}
	switch {
	case strings.Contains(body, resumeMark):
		resp.Text = resumeText
	case strings.Contains(body, childMark) && !strings.Contains(body, parentMark):
		switch n {
		case 0:
			resp.Text = "Starting two helpers."
			resp.ToolCalls = []llmtest.ToolCall{
				bashArgs(c.wrap("child-setsid", c.spawn("setsid", "child-setsid")), false),
				bashArgs(c.wrap("child-dfork", c.spawn("dfork", "child-dfork")), false),
			}
		case 2:
			resp.ToolCalls = []llmtest.ToolCall{bashArgs(c.wrap("child-s2", "sleep 0.1"), false)}
		default:
			resp.Text = "child done: both helpers started and the check ran."
		}
	default:
		k1 := len(p.step1)
		var step2 []llmtest.ToolCall
		if p.job {
			step2 = append(step2, bashArgs(c.wrap("job", c.spawn("setsid", "job-setsid")+"; sleep 0.3; echo job-done > "+c.fifo), true))
		}
		switch p.child {
		case "spawn":
			step2 = append(step2, toolCall("subagent", map[string]any{"description": "crash child", "prompt": childMark + ": start the helpers"}))
		case "background":
			step2 = append(step2, toolCall("subagent", map[string]any{"description": "crash child", "prompt": childMark + ": start the helpers", "run_in_background": true}))
		}
		switch {
		case n == 0:
			resp.Reasoning = "Start the helpers in parallel, then check."
			for _, s := range p.step1 {
				switch s {
				case "read":
					resp.ToolCalls = append(resp.ToolCalls, toolCall("read", map[string]any{"file_path": "README.md"}))
				case "glob":
					resp.ToolCalls = append(resp.ToolCalls, toolCall("glob", map[string]any{"pattern": "**/*.md"}))
				default:
					resp.ToolCalls = append(resp.ToolCalls, bashArgs(c.wrap(s, c.spawn(s, s)), false))
				}
			}
		case n == k1 && len(step2) > 0:
			resp.Text = "Now the background work."
			resp.ToolCalls = step2
		case n == k1+len(step2):
			resp.ToolCalls = []llmtest.ToolCall{bashArgs(c.wrap("s3", "sleep 0.1"), false)}
		default:
			resp.Text = "parent done: the helpers are running and the checks passed."
		}
	}
	return resp
}

// fail reports a broken assertion of one run and tallies it.
func (p *crashPlan) fail(t *testing.T, tally *crashTally, category, format string, args ...any) {
	t.Helper()
	tally.add(category, p.index)
	t.Errorf("%s: %s\n%s", category, fmt.Sprintf(format, args...), p)
}

func (p *crashPlan) run(t *testing.T, tally *crashTally) {
	e := newEnv(t)
	withoutExternalAgents(t, e)
	dir := filepath.Join(e.cwd, ".crash")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.cwd, "README.md"), "# crash test workspace\n", 0o644)
	cmds := crashCmds{
		marker: fmt.Sprintf("CRASH_MARK=m%d-%d-%d", os.Getpid(), p.seed, p.index),
		pids:   filepath.Join(dir, "pids"),
		fifo:   filepath.Join(dir, "fifo"),
	}
	marks, closeFifo, err := markerFifo(cmds.fifo)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFifo()
	e.srv.SetFallback(func(r llmtest.Request) llmtest.Response { return p.respond(cmds, r) })

	args := []string{"run", "--json", "--permission", p.preset}
	if p.child == "background" {
		patch := filepath.Join(t.TempDir(), "one-shot.yaml")
		writeFile(t, patch, "- id: subagents\n  module: subagents\n  config: {mode: one-shot}\n", 0o600)
		args = append(args, "--patch", patch)
	}
	args = append(args, parentMark+": start the helpers and check them")

	w := startWrapped(t, e, args)
	start := time.Now()
	killed, reason := p.awaitKillPoint(w, marks)
	if killed {
		if err := syscall.Kill(w.dshPid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatal(err)
		}
		<-w.exited
	}
	t.Logf("%s: dsh %s after %v and %d streamed events (%s)", p, w.status, time.Since(start).Round(time.Millisecond), w.count(), reason)
	if reason == "hang" {
		p.fail(t, tally, "run hung", "neither finished nor reached its kill point in %v; stdout:\n%s", runDeadline, w.tail())
	}
	if killed {
		tally.count(&tally.killed)
	} else {
		tally.count(&tally.finished)
	}

	left := awaitNoSurvivors(w.pid, w.dshPid, cmds.marker, time.Now().Add(survivorGrace))
	if len(left) > 0 {
		pids, _ := os.ReadFile(cmds.pids)
		p.fail(t, tally, "process survived dsh", "%d processes alive %v after dsh %s (killed=%v):%s\nrecorded pids (namespace-local under bwrap):\n%s",
			len(left), survivorGrace, w.status, killed, describe(left), pids)
		killAll(left)
	}
	w.release(t)
	if !killed {
		// A run that ended by itself ran the whole script: every command
		// started its processes (so the survivor check was not vacuous).
		pids, _ := os.ReadFile(cmds.pids)
		for _, tag := range p.pidTags() {
			if !strings.Contains("\n"+string(pids), "\n"+tag+" ") {
				p.fail(t, tally, "scenario did not run", "no pid recorded for %q; recorded:\n%s", tag, pids)
			}
		}
	}

	p.checkStore(t, tally, e, killed)
}
