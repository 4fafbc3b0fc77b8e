package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Backend is one way of confining commands on this machine.
type Backend interface {
	// Name identifies the backend in Confined.Backend and in logs.
	Name() string
	// Probe reports whether the backend really confines on this machine
	// (nil) or why not. It runs a process, so callers cache the result;
	// Sandbox does.
	Probe() error
	// Confine wraps argv so that it runs under p. Policies in
	// danger-full-access come back unwrapped.
	Confine(argv []string, p Policy) (Confined, error)
}

// Select returns the first backend whose Probe succeeds. When none does,
// the error wraps ErrUnavailable and names each backend's reason.
func Select(backends ...Backend) (Backend, error) {
	var why []string
	for _, b := range backends {
		err := b.Probe()
		if err == nil {
			return b, nil
		}
		why = append(why, b.Name()+": "+err.Error())
	}
	if len(why) == 0 {
		why = append(why, "no backends configured")
	}
	return nil, fmt.Errorf("%w (%s)", ErrUnavailable, strings.Join(why, "; "))
}

// Sandbox confines commands with the first working backend of its list,
// probed once on first need and remembered (including a failure: the
// machine does not grow user namespaces mid-session). It is safe for
// concurrent use.
type Sandbox struct {
	backends []Backend

	once    sync.Once
	backend Backend
	err     error
}

// New returns a Sandbox that prefers backends in the given order.
func New(backends ...Backend) *Sandbox {
	return &Sandbox{backends: backends}
}

// Default returns a Sandbox preferring bubblewrap (namespaces: read-only
// root, PID and network isolation) and falling back to Landlock (works in
// containers without user namespaces). The Landlock fallback re-executes
// this binary, so main must call RunHelperIfRequested first thing.
func Default() *Sandbox {
	return New(NewBwrap(""), NewLandlock(""))
}

// Backend returns the selected backend, probing on the first call.
func (s *Sandbox) Backend() (Backend, error) {
	s.once.Do(func() { s.backend, s.err = Select(s.backends...) })
	return s.backend, s.err
}

// Confine wraps argv to run under p. danger-full-access never needs (or
// probes) a backend; any other mode fails with an error wrapping
// ErrUnavailable when no backend works, so a command is never run
// unconfined by accident.
func (s *Sandbox) Confine(argv []string, p Policy) (Confined, error) {
	if err := validate(argv, p); err != nil {
		return Confined{}, err
	}
	if p.Mode == DangerFullAccess {
		return Unconfined(argv), nil
	}
	b, err := s.Backend()
	if err != nil {
		return Confined{}, err
	}
	return b.Confine(argv, p)
}

// Unconfined is what danger-full-access runs: argv unchanged, nothing
// enforced, nothing ever reported as denied.
func Unconfined(argv []string) Confined {
	return Confined{
		Argv:        argv,
		Backend:     "none",
		Enforcement: None,
		Denied:      neverDenied,
	}
}

// validate rejects what no backend can run.
func validate(argv []string, p Policy) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("sandbox: empty command")
	}
	if _, err := ParseMode(string(p.Mode)); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := ValidateUnixSockets(p.UnixSockets); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}
