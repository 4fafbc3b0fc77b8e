package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
)

// recorder collects hook invocations in order; hooks may run on the body
// goroutine, hence the lock.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func TestMiddlewareOrder(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, func(d *Definition) {
		d.ProjectContent = func(c *Call, r Result) []llm.Block { rec.add("project"); return nil }
		d.FinalizeContent = func(c *Call, r Result) []llm.Block { rec.add("finalize"); return nil }
	})
	e.body = func(ctx context.Context, c *Call) (Result, error) {
		if ctx.Value(ctxKey{}) != "from-exec2" {
			t.Error("body did not get the context replaced by the wrapper")
		}
		rec.add("body")
		return Text("ok"), nil
	}
	for _, n := range []string{"pre1", "pre2"} {
		e.p.UsePreExecute(func(ctx context.Context, c *Call, next func(context.Context) Decision) Decision {
			rec.add(n)
			d := next(ctx)
			rec.add(n + ":" + string(d.Kind))
			return d
		})
	}
	for _, n := range []string{"guard1", "guard2"} {
		e.p.UseGuard(func(c *Call) string { rec.add(n); return "" })
	}
	for _, n := range []string{"exec1", "exec2"} {
		e.p.UseExecute(func(ctx context.Context, c *Call, next func(context.Context) (Result, error)) (Result, error) {
			rec.add(n + "<")
			if n == "exec2" {
				ctx = context.WithValue(ctx, ctxKey{}, "from-exec2")
			}
			r, err := next(ctx)
			rec.add(n + ">")
			return r, err
		})
	}
	for _, n := range []string{"post1", "post2"} {
		e.p.UsePostExecute(func(ctx context.Context, c *Call, r Result) PostDecision {
			rec.add(n)
			return PostDecision{Kind: Accept}
		})
	}
	for _, n := range []string{"obs1", "obs2"} {
		e.p.Observe(func(c *Call, r Result) { rec.add(n) })
	}
	r := e.p.Run(context.Background(), &Call{Name: "echo"})
	if r.IsError {
		t.Fatalf("unexpected error %q", textOf(r))
	}
	want := []string{"pre1", "pre2", "pre2:allow", "pre1:allow", "guard1", "guard2",
		"exec1<", "exec2<", "body", "exec2>", "exec1>", "project", "post1", "post2", "finalize", "obs1", "obs2"}
	if got := rec.get(); !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

type ctxKey struct{}

func TestFinalizeExactlyOnceEveryOutcome(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		setup    func(e *env)
		body     func(ctx context.Context, c *Call) (Result, error)
		timeout  time.Duration
		wantCode string
	}{
		{name: "success"},
		{name: "invalid args", raw: "nope", wantCode: CodeInvalidArgs},
		{name: "deny", setup: func(e *env) { e.p.UsePreExecute(preReturning(Decision{Kind: Deny, Reason: "x"})) }, wantCode: CodeDenied},
		{name: "ask without approver", setup: func(e *env) { e.p.UsePreExecute(preReturning(Decision{Kind: Ask})) }, wantCode: CodeDenied},
		{name: "guard", setup: func(e *env) { e.p.UseGuard(func(*Call) string { return "x" }) }, wantCode: CodeDenied},
		{name: "body error", body: func(context.Context, *Call) (Result, error) { return Result{}, errors.New("x") }, wantCode: CodeFailed},
		{name: "body panic", body: func(context.Context, *Call) (Result, error) { panic("x") }, wantCode: CodePanic},
		{name: "timeout", timeout: time.Millisecond, body: func(ctx context.Context, _ *Call) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		}, wantCode: CodeTimeout},
		{name: "block", setup: func(e *env) {
			e.p.UsePostExecute(func(context.Context, *Call, Result) PostDecision { return PostDecision{Kind: Block} })
		}, wantCode: CodeBlocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var finals, observed atomic.Int32
			e := newEnv(t, func(d *Definition) {
				d.Timeout = tt.timeout
				d.FinalizeContent = func(c *Call, r Result) []llm.Block {
					finals.Add(1)
					return append(slices.Clone(r.Content), llm.TextBlock(" [final]"))
				}
			})
			e.body = tt.body
			e.p.Observe(func(c *Call, r Result) {
				observed.Add(1)
				if !strings.HasSuffix(textOf(r), " [final]") {
					t.Errorf("observer saw unfinalized content %q", textOf(r))
				}
			})
			if tt.setup != nil {
				tt.setup(e)
			}
			r := e.p.Run(context.Background(), &Call{Name: "echo", RawArguments: tt.raw})
			if code(r) != tt.wantCode {
				t.Fatalf("code %q (%q), want %q", code(r), textOf(r), tt.wantCode)
			}
			if finals.Load() != 1 || observed.Load() != 1 {
				t.Fatalf("finalize ran %d times, observers %d times; want 1 and 1", finals.Load(), observed.Load())
			}
		})
	}

	t.Run("unknown tool is observed but has nothing to finalize", func(t *testing.T) {
		e := newEnv(t, nil)
		var observed atomic.Int32
		e.p.Observe(func(c *Call, r Result) { observed.Add(1) })
		if r := e.p.Run(context.Background(), &Call{Name: "missing"}); code(r) != CodeUnknownTool || observed.Load() != 1 {
			t.Fatalf("code %q observed %d", code(r), observed.Load())
		}
	})
}

func TestFinalizePanicAndObserverPanic(t *testing.T) {
	e := newEnv(t, func(d *Definition) {
		d.FinalizeContent = func(c *Call, r Result) []llm.Block { panic("final") }
	})
	var second atomic.Bool
	e.p.Observe(func(c *Call, r Result) { panic("observer") })
	e.p.Observe(func(c *Call, r Result) { second.Store(true) })
	r := e.p.Run(context.Background(), &Call{Name: "echo"})
	if code(r) != CodePanic || !strings.Contains(textOf(r), "panicked in finalize-content: final") {
		t.Fatalf("got %q %q", code(r), textOf(r))
	}
	if !second.Load() {
		t.Fatal("a panicking observer stopped the next one")
	}
	if strings.Contains(textOf(r), "goroutine") || !strings.Contains(r.Error.Reason, "goroutine") {
		t.Fatal("the stack belongs in Reason, not in model content")
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	type bodyKind int
	const (
		returnsCtxErr  bodyKind = iota // well behaved: returns ctx.Err()
		returnsResult                  // returns partial output after ctx ends
		returnsOwnCode                 // returns its own *Error TOOL_TIMEOUT
		ignoresContext                 // never returns until the test ends
	)
	tests := []struct {
		name      string
		timeout   time.Duration
		cancel    bool // the caller cancels once the body started
		kind      bodyKind
		wantCode  string
		wantText  string
		wantCause error
		wantTook  time.Duration // on the bubble's fake clock
	}{
		{"timeout", 20 * time.Millisecond, false, returnsCtxErr, CodeTimeout, "Error: tool echo timed out after 20ms", errTimeout, 20 * time.Millisecond},
		{"timeout keeps a returned result", 20 * time.Millisecond, false, returnsResult, "", "partial", errTimeout, 20 * time.Millisecond},
		{"timeout keeps the body's own timeout error", 20 * time.Millisecond, false, returnsOwnCode, CodeTimeout, "Error: my own timeout", errTimeout, 20 * time.Millisecond},
		{"timeout abandons a stuck body", 20 * time.Millisecond, false, ignoresContext, CodeTimeout, "timed out after 20ms", nil, 20*time.Millisecond + defaultAbandonGrace},
		{"default limit abandons a stuck body", 0, false, ignoresContext, CodeTimeout, "timed out after 2m0s", nil, DefaultTimeout + defaultAbandonGrace},
		{"caller cancel", 0, true, returnsCtxErr, CodeAborted, "Error: tool call cancelled", context.Canceled, 0},
		{"caller cancel keeps a returned result", 0, true, returnsResult, "", "partial", context.Canceled, 0},
		{"caller cancel abandons a stuck body", 0, true, ignoresContext, CodeAborted, "tool call cancelled", nil, defaultAbandonGrace},
		{"caller cancel with a tool timeout set", time.Hour, true, returnsCtxErr, CodeAborted, "tool call cancelled", context.Canceled, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				late := make(chan struct{})
				defer func() {
					// Let an abandoned body return; its late result must
					// reach nobody.
					close(release)
					if tt.kind == ignoresContext {
						<-late
					}
				}()
				started := make(chan struct{})
				causes := make(chan error, 1)
				e := newEnv(t, func(d *Definition) { d.Timeout = tt.timeout })
				var seen []Result
				e.p.Observe(func(c *Call, r Result) { seen = append(seen, r) })
				e.body = func(ctx context.Context, c *Call) (Result, error) {
					close(started)
					if tt.kind == ignoresContext {
						defer close(late)
						<-release
						return Text("too late"), nil
					}
					<-ctx.Done()
					causes <- context.Cause(ctx)
					switch tt.kind {
					case returnsResult:
						return Text("partial"), nil
					case returnsOwnCode:
						return Result{}, Errorf(CodeTimeout, "my own timeout")
					}
					return Result{}, ctx.Err()
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancel {
					go func() { <-started; cancel() }()
				}
				t0 := time.Now()
				r := e.p.Run(ctx, &Call{Name: "echo"})
				if took := time.Since(t0); took != tt.wantTook {
					t.Errorf("the call took %v, want %v", took, tt.wantTook)
				}
				if code(r) != tt.wantCode || !strings.Contains(textOf(r), tt.wantText) {
					t.Fatalf("got code %q %q; want %q containing %q", code(r), textOf(r), tt.wantCode, tt.wantText)
				}
				if tt.wantCause != nil {
					if got := <-causes; !errors.Is(got, tt.wantCause) {
						t.Fatalf("body ctx cause = %v, want %v", got, tt.wantCause)
					}
				}
				if len(seen) != 1 || code(seen[0]) != tt.wantCode {
					t.Fatalf("observers saw %+v", seen)
				}
			})
		})
	}
}

// TestTimeoutLimits: every tool runs under a limit, taken from a
// SetToolTimeout override, else Definition.Timeout, else the pipeline's
// default.
func TestTimeoutLimits(t *testing.T) {
	stuck := func(ctx context.Context, c *Call) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	}
	tests := []struct {
		name  string
		def   time.Duration
		setup func(p *Pipeline)
		want  time.Duration
	}{
		{"default", 0, nil, DefaultTimeout},
		{"declared", 7 * time.Minute, nil, 7 * time.Minute},
		{"pipeline default", 0, func(p *Pipeline) { p.SetDefaultTimeout(30 * time.Second) }, 30 * time.Second},
		{"declared beats pipeline default", 7 * time.Minute, func(p *Pipeline) { p.SetDefaultTimeout(30 * time.Second) }, 7 * time.Minute},
		{"reset default", 0, func(p *Pipeline) { p.SetDefaultTimeout(time.Second); p.SetDefaultTimeout(0) }, DefaultTimeout},
		{"override", 7 * time.Minute, func(p *Pipeline) { p.SetToolTimeout("echo", 3*time.Second) }, 3 * time.Second},
		{"override of another tool", 0, func(p *Pipeline) { p.SetToolTimeout("other", 3*time.Second) }, DefaultTimeout},
		{"removed override", 0, func(p *Pipeline) { p.SetToolTimeout("echo", 3*time.Second); p.SetToolTimeout("echo", 0) }, DefaultTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, func(d *Definition) { d.Timeout = tt.def; d.Execute = stuck })
				if tt.setup != nil {
					tt.setup(e.p)
				}
				if got := e.p.Timeout(&e.def); got != tt.want {
					t.Errorf("Timeout = %v, want %v", got, tt.want)
				}
				t0 := time.Now()
				r := e.p.Run(context.Background(), &Call{Name: "echo"})
				if took := time.Since(t0); took != tt.want || code(r) != CodeTimeout || !strings.Contains(textOf(r), "timed out after "+tt.want.String()) {
					t.Fatalf("after %v: %q %q, want TOOL_TIMEOUT after %v", took, code(r), textOf(r), tt.want)
				}
			})
		})
	}
}

func TestConcurrentRunAndRegistration(t *testing.T) {
	e := newEnv(t, nil)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				if r := e.p.Run(context.Background(), &Call{Name: "echo", RawArguments: `{}`}); r.IsError {
					t.Errorf("run failed: %q", textOf(r))
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := range 20 {
				e.p.UseGuard(func(*Call) string { return "" })
				e.p.Observe(func(*Call, Result) {})
				_ = e.reg.Register(fmt.Sprintf("s%d", i), defNamed(fmt.Sprintf("t%d", j), ""))
			}
		}()
	}
	wg.Wait()
}

func BenchmarkRun(b *testing.B) {
	reg := NewRegistry()
	if err := reg.Register("", Definition{
		Name:       "noop",
		Parameters: json.RawMessage(`{"type":"object"}`),
		Execute:    func(ctx context.Context, c *Call) (Result, error) { return Text("ok"), nil },
	}); err != nil {
		b.Fatal(err)
	}
	p := NewPipeline(reg)
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancellable", cancellable}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := Call{Name: "noop", RawArguments: `{"command":"ls -la"}`}
				if r := p.Run(bc.ctx, &c); r.IsError {
					b.Fatal(textOf(r))
				}
			}
		})
	}
}
