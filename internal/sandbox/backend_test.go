package sandbox

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeBackend is a Backend whose probe result is fixed and counted.
type fakeBackend struct {
	name   string
	err    error
	probes atomic.Int32
}

func (f *fakeBackend) Name() string { return f.name }

func (f *fakeBackend) Probe() error { f.probes.Add(1); return f.err }

func (f *fakeBackend) Confine(argv []string, p Policy) (Confined, error) {
	return Confined{Argv: append([]string{f.name}, argv...), Backend: f.name, Enforcement: Full, Denied: outputDenied}, nil
}

func TestSelect(t *testing.T) {
	broken := errors.New("no user namespaces")
	tests := []struct {
		name     string
		backends []*fakeBackend
		want     string // "" = ErrUnavailable
	}{
		{"first working wins", []*fakeBackend{{name: "a"}, {name: "b"}}, "a"},
		{"falls back", []*fakeBackend{{name: "a", err: broken}, {name: "b"}}, "b"},
		{"none works", []*fakeBackend{{name: "a", err: broken}, {name: "b", err: broken}}, ""},
		{"none configured", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var bs []Backend
			for _, b := range tc.backends {
				bs = append(bs, b)
			}
			got, err := Select(bs...)
			if tc.want == "" {
				if !errors.Is(err, ErrUnavailable) || got != nil {
					t.Fatalf("Select = %v, %v; want ErrUnavailable", got, err)
				}
				for _, b := range tc.backends {
					if !strings.Contains(err.Error(), b.name+": no user namespaces") {
						t.Errorf("error %q does not say why %s failed", err, b.name)
					}
				}
				return
			}
			if err != nil || got.Name() != tc.want {
				t.Fatalf("Select = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// A machine where no real backend works: an absent bwrap and a Landlock
// helper that is not this binary.
func TestSelectRealBackendsUnavailable(t *testing.T) {
	_, err := Select(NewBwrap("/nonexistent/bwrap"), NewLandlock("/bin/true"))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Select = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "RunHelperIfRequested") {
		t.Errorf("error %q does not point at the missing helper hook", err)
	}
}

// Where bubblewrap cannot run (a container without user namespaces),
// the default order falls back to Landlock.
func TestSelectFallsBackToLandlock(t *testing.T) {
	requireWorking(t, NewLandlock(""))
	b, err := Select(NewBwrap("/nonexistent/bwrap"), NewLandlock(""))
	if err != nil || b.Name() != "landlock" {
		t.Fatalf("Select = %v, %v; want landlock", b, err)
	}
}

func TestSandboxProbesOnce(t *testing.T) {
	bad := &fakeBackend{name: "bad", err: errors.New("nope")}
	good := &fakeBackend{name: "good"}
	s := New(bad, good)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c, err := s.Confine([]string{"true"}, Policy{Mode: ReadOnly})
			if err != nil || c.Backend != "good" {
				t.Errorf("Confine = %+v, %v", c, err)
			}
		})
	}
	wg.Wait()
	if bad.probes.Load() != 1 || good.probes.Load() != 1 {
		t.Errorf("probes: bad %d good %d, want 1 each", bad.probes.Load(), good.probes.Load())
	}
}

func TestSandboxUnavailable(t *testing.T) {
	f := &fakeBackend{name: "f", err: errors.New("nope")}
	s := New(f)
	for _, m := range []Mode{ReadOnly, WorkspaceWrite} {
		if _, err := s.Confine([]string{"true"}, Policy{Mode: m, Workspace: "/"}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Confine error %v, want ErrUnavailable", m, err)
		}
	}
	// danger-full-access runs unconfined without a backend, or a probe.
	c, err := New().Confine([]string{"echo", "hi"}, Policy{Mode: DangerFullAccess})
	if err != nil || c.Backend != "none" || c.Enforcement != None || strings.Join(c.Argv, " ") != "echo hi" {
		t.Fatalf("danger-full-access: %+v, %v", c, err)
	}
	if c.Denied(1, []byte("Permission denied")) {
		t.Error("an unconfined command was reported as denied")
	}
	if f.probes.Load() != 1 {
		t.Errorf("probes %d, want 1 (cached failure)", f.probes.Load())
	}
}

func TestConfineValidates(t *testing.T) {
	s := New(&fakeBackend{name: "f"})
	for _, tc := range []struct {
		argv []string
		p    Policy
	}{
		{nil, Policy{Mode: ReadOnly}},
		{[]string{""}, Policy{Mode: ReadOnly}},
		{[]string{"true"}, Policy{Mode: "everything"}},
	} {
		if _, err := s.Confine(tc.argv, tc.p); err == nil {
			t.Errorf("Confine(%q, %q) accepted", tc.argv, tc.p.Mode)
		}
	}
	for _, b := range realBackends() {
		if _, err := b.Confine([]string{"true"}, Policy{Mode: WorkspaceWrite, Workspace: "relative"}); err == nil {
			t.Errorf("%s accepted a relative workspace", b.Name())
		}
		if _, err := b.Confine([]string{"true"}, Policy{Mode: WorkspaceWrite, Workspace: "/nonexistent/ws"}); err == nil {
			t.Errorf("%s accepted a missing workspace", b.Name())
		}
	}
}

func TestOutputDenied(t *testing.T) {
	tests := []struct {
		name string
		code int
		out  string
		want bool
	}{
		{"erofs", 1, "bash: line 1: /etc/x: Read-only file system\n", true},
		{"eacces go style", 1, "open /etc/x: permission denied\n", true},
		{"eperm socket", 1, "bash: socket: Operation not permitted\n", true},
		{"no route", 7, "curl: (7) Failed to connect: Network is unreachable\n", true},
		{"dns", 2, "ping: example.com: Temporary failure in name resolution\n", true},
		{"curl dns", 6, "curl: (6) Could not resolve host: example.com\n", true},
		{"mount point", 1, "mv: cannot move '.git' to 'x': Device or resource busy\n", true},
		{"success mentions a denial", 0, "find: '/root': Permission denied\n", false},
		{"plain failure", 1, "FAIL: TestFoo\n", false},
		{"connection refused is not a denial", 1, "connect: Connection refused\n", false},
		{"runner failure", 1, "bwrap: Can't mkdir /x: Read-only file system\n", false},
		{"helper failure", 126, helperErrPrefix + "cannot confine: operation not permitted\n", false},
		{"denial after runner noise", 1, "bwrap: warning\nsh: /x: Permission denied\n", true},
	}
	for _, tc := range tests {
		if got := outputDenied(tc.code, []byte(tc.out)); got != tc.want {
			t.Errorf("%s: outputDenied = %v, want %v", tc.name, got, tc.want)
		}
	}
}
