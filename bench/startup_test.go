package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
)

// lazyBuild builds one binary per key, once per benchmark process.
type lazyBuild struct {
	once sync.Once
	path string
	err  error
}

var (
	helloBuild  lazyBuild
	staticBuild lazyBuild
	floorBuild  lazyBuild
)

func (o *lazyBuild) get(b *testing.B, build func(dir string) (string, error)) string {
	o.once.Do(func() {
		dir, err := os.MkdirTemp("", "dsh-bench")
		if err != nil {
			o.err = err
			return
		}
		o.path, o.err = build(dir)
	})
	if o.err != nil {
		b.Fatal(o.err)
	}
	return o.path
}

func goBuild(dir, out string, env []string, args ...string) error {
	c := exec.Command("go", append([]string{"build", "-o", out}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	if raw, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", out, err, raw)
	}
	return nil
}

// helloBinary builds a Go hello-world with the same toolchain and
// environment as dshBinary: the reference the start-up figures are
// given against.
func helloBinary(b *testing.B) string {
	return helloBuild.get(b, func(dir string) (string, error) {
		src := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n"
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			return "", err
		}
		out := filepath.Join(dir, "hello")
		return out, goBuild(dir, out, nil, ".")
	})
}

// staticBinary builds dsh with CGO_ENABLED=0: without cgo (which only
// the net package's resolver brings in) the binary is statically linked
// and starts without the dynamic loader and libc's thread set-up.
func staticBinary(b *testing.B) string {
	return staticBuild.get(b, func(dir string) (string, error) {
		out := filepath.Join(dir, "dsh")
		return out, goBuild("", out, []string{"CGO_ENABLED=0"}, "github.com/dsh-dev/dsh/cmd/dsh")
	})
}

// floorBinary builds a hello-world that links every third-party package
// dsh links (each imported for its side effects: its initialisation runs,
// as in dsh, before main): the start-up of dsh's dependency set with none
// of dsh's own code. A figure below it is out of reach of any program
// built on these dependencies.
func floorBinary(b *testing.B) string {
	return floorBuild.get(b, func(dir string) (string, error) {
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			return "", fmt.Errorf("go list -m: %w", err)
		}
		mod := strings.TrimSpace(string(root))
		list, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Name}}{{end}}", "github.com/dsh-dev/dsh/cmd/dsh").Output()
		if err != nil {
			return "", fmt.Errorf("go list -deps: %w", err)
		}
		var src strings.Builder
		src.WriteString("package main\n\nimport (\n\t\"fmt\"\n")
		for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
			path, name, _ := strings.Cut(line, " ")
			// dsh's own packages, commands, and other modules' internal
			// packages (their public importers initialise them).
			if strings.HasPrefix(path, "github.com/dsh-dev/dsh") || name == "main" ||
				strings.Contains(path+"/", "/internal/") {
				continue
			}
			fmt.Fprintf(&src, "\t_ %q\n", path)
		}
		src.WriteString(")\n\nfunc main() { fmt.Println(\"hello, world\") }\n")
		gomod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
		if err != nil {
			return "", err
		}
		_, rest, _ := strings.Cut(string(gomod), "\n")
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module floor\n"+rest), 0o644); err != nil {
			return "", err
		}
		sum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
			return "", err
		}
		out := filepath.Join(dir, "floor")
		return out, goBuild(dir, out, []string{"CGO_ENABLED=0", "GOFLAGS=-mod=mod"}, ".")
	})
}

// startupVariant is one dsh binary under measurement, with its own
// $DSH_HOME (builds of different schema versions cannot share one).
type startupVariant struct {
	name       string // metric prefix: "" for the default build
	bin        string
	home       string
	version    []time.Duration
	first      []time.Duration
	versionCPU []time.Duration // user+system time of dsh version
	runCPU     []time.Duration // user+system time of the whole dsh run
}

// cpu is the user+system time of an exited command.
func cpu(c *exec.Cmd) time.Duration {
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

// BenchmarkStartup measures, in one run and interleaved round by round
// (so that the machine's load weighs on all of them alike), the wall
// time from exec to exit of a Go hello-world, `bash -c true` and `dsh
// version`, and from exec to the fake model server receiving the first
// request of `dsh run` (a new session in an existing $DSH_HOME holding
// DSH_BENCH_SESSIONS earlier sessions, 100 unless set; the server notes
// when the request's headers arrived). Each round runs each
// once; b.N is the number of rounds. It reports medians and their ratios
// to the hello-world's, the figures that do not depend on the machine,
// and the CPU time (user+system) of hello-world, dsh version and the
// whole dsh run (exec to exit), which a busy machine inflates less.
//
// dsh is measured as `go build` makes it (cgo enabled where a C
// toolchain is present, so dynamically linked) and, with the prefix
// "static-", built with CGO_ENABLED=0. DSH_BENCH_BASELINE=/path/to/dsh
// adds another binary (say, one built from an older commit), prefix
// "baseline-", for a before/after comparison in the same run; a
// colon-separated list adds several ("baseline-", "baseline2-", …).
// Ratios are given to the hello-world's median and to `bash -c true`'s.
//
//	go test ./bench -run '^$' -bench Startup -benchtime 200x
func BenchmarkStartup(b *testing.B) {
	hello := helloBinary(b)
	variants := []*startupVariant{{name: "", bin: dshBinary(b)}, {name: "static-", bin: staticBinary(b)}}
	if list := os.Getenv("DSH_BENCH_BASELINE"); list != "" {
		for i, base := range strings.Split(list, ":") {
			name := "baseline-"
			if i > 0 {
				name = fmt.Sprintf("baseline%d-", i+1)
			}
			variants = append(variants, &startupVariant{name: name, bin: base})
		}
	}
	srv := llmtest.New()
	defer srv.Close()
	srv.SetFallback(func(llmtest.Request) llmtest.Response { return llmtest.Response{Text: "ok"} })
	wd := b.TempDir()
	for _, v := range variants {
		v.home = b.TempDir()
	}
	cmd := func(v *startupVariant, args ...string) *exec.Cmd {
		c := exec.Command(v.bin, args...)
		c.Dir = wd
		c.Env = append(os.Environ(), "DSH_HOME="+v.home, "DEEPSEEK_API_KEY=k", "DEEPSEEK_BASE_URL="+srv.URL())
		return c
	}
	// exit runs c and returns its wall time (exec to exit) and CPU time.
	exit := func(c *exec.Cmd) (wall, cpuT time.Duration) {
		t0 := time.Now()
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", c.Args, err, out)
		}
		return time.Since(t0), cpu(c)
	}
	// firstRequest runs dsh run and returns the time from exec to its
	// first request, and the CPU time of the whole run.
	firstRequest := func(v *startupVariant) (first, cpuT time.Duration) {
		n := srv.RequestCount()
		c := cmd(v, "run", "hi")
		var out strings.Builder
		c.Stdout, c.Stderr = &out, &out
		t0 := time.Now()
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		if err := srv.WaitRequests(context.Background(), n+1); err != nil {
			b.Fatal(err)
		}
		d := srv.Requests()[n].Arrived.Sub(t0)
		if err := c.Wait(); err != nil {
			b.Fatalf("%s run: %v: %s", v.bin, err, out.String())
		}
		return d, cpu(c)
	}
	// The first run creates $DSH_HOME and its database; the measured
	// ones open it. A store's cost grows with what it holds, so each home
	// first gets DSH_BENCH_SESSIONS sessions (default 100) of its own
	// binary's making.
	sessions := 100
	if n, err := strconv.Atoi(os.Getenv("DSH_BENCH_SESSIONS")); err == nil && n >= 1 {
		sessions = n
	}
	for _, v := range variants {
		for range sessions {
			firstRequest(v)
		}
	}
	floor := floorBinary(b)
	var helloT, bashT, helloCPU, floorT []time.Duration
	load0 := loadAvg()
	b.ResetTimer()
	for range b.N {
		w, c := exit(exec.Command(hello))
		helloT, helloCPU = append(helloT, w), append(helloCPU, c)
		w, _ = exit(exec.Command("bash", "-c", "true"))
		bashT = append(bashT, w)
		w, _ = exit(exec.Command(floor))
		floorT = append(floorT, w)
		for _, v := range variants {
			w, c := exit(cmd(v, "version"))
			v.version, v.versionCPU = append(v.version, w), append(v.versionCPU, c)
			w, c = firstRequest(v)
			v.first, v.runCPU = append(v.first, w), append(v.runCPU, c)
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	h, hc, bt := median(helloT), median(helloCPU), median(bashT)
	ratio := func(d time.Duration) float64 { return float64(d) / float64(h) }
	ratioBash := func(d time.Duration) float64 { return float64(d) / float64(bt) }
	b.ReportMetric(ms(h), "hello-ms")
	b.ReportMetric(ms(hc), "hello-cpu-ms")
	b.ReportMetric(ms(bt), "bash-true-ms")
	b.ReportMetric(ratio(bt), "bash-x-hello")
	b.ReportMetric(ms(median(floorT)), "deps-floor-ms")
	b.ReportMetric(ratio(median(floorT)), "deps-floor-x-hello")
	for _, v := range variants {
		b.ReportMetric(ms(median(v.version)), v.name+"version-ms")
		b.ReportMetric(ms(median(v.first)), v.name+"first-request-ms")
		b.ReportMetric(ratio(median(v.version)), v.name+"version-x-hello")
		b.ReportMetric(ratio(median(v.first)), v.name+"first-request-x-hello")
		b.ReportMetric(ratioBash(median(v.version)), v.name+"version-x-bash")
		b.ReportMetric(ratioBash(median(v.first)), v.name+"first-request-x-bash")
		// CPU time suffers less than wall time from a busy machine.
		b.ReportMetric(ms(median(v.versionCPU)), v.name+"version-cpu-ms")
		b.ReportMetric(float64(median(v.versionCPU))/float64(hc), v.name+"version-cpu-x-hello")
		b.ReportMetric(ms(median(v.runCPU)), v.name+"run-cpu-ms")
	}
	b.Logf("%s, %d rounds; load average before %s, after %s", time.Now().UTC().Format(time.RFC3339), b.N, load0, loadAvg())
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAvg is /proc/loadavg's three load averages, "?" where unreadable.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
