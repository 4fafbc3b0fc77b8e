// Package memlimit gives a dsh process a soft memory limit, so that the
// Go runtime's garbage-collection headroom does not double a small live
// heap into the resident set (issue 12: peak RSS of long runs).
//
// The limit is the runtime's own (debug.SetMemoryLimit): it only makes
// the collector run sooner as Go-managed memory nears it, and never
// fails an allocation. A fixed limit below the live heap would make the
// collector run back to back (up to the runtime's 50% CPU cap), so the
// limit is a floor: after every collection it is raised to the live heap
// plus half of it (and the runtime's own non-heap memory) when that is
// larger, which is GOGC=50 for heaps above the floor — a long session's
// resume or a busy `dsh serve` keeps bounded GC work.
//
// GOMEMLIMIT, when set to anything (a size, or "off"), is the user's
// choice: the runtime has applied it, and this package leaves it alone.
package memlimit

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// DefaultFloor is the limit on Go-managed memory when GOMEMLIMIT is not
// set. Chosen by measurement (bench/README.md, "Memory and reopening long
// sessions", "Released payloads"): with a 2,000-step run's ~14 MiB live
// heap, 32 MiB cut the peak RSS by ~5 MB at no measurable CPU per step,
// while fixed limits of 24 and 20 MiB doubled the CPU per step late in
// the run (the collector running nearly every step). Once the live log
// released its payloads (~6–8 MiB live), a 24 MiB floor, raised with the
// live heap as below, cut the peak of 200 steps of 1 MB outputs by ~2 MB
// at no measurable CPU; 16 MiB then took ~4.5 MB off the peak of a
// 2,000-step run and ~3 MB off the 1 MB outputs' (the floor binds only
// below ~8 MiB live: above, 1.5× the live heap does), again with no CPU
// difference the runs could show.
const DefaultFloor int64 = 16 << 20

// EnvVar is the standard variable that overrides dsh's choice.
const EnvVar = "GOMEMLIMIT"

// Select returns the floor to apply for an environment, or ok false when
// GOMEMLIMIT is set (the runtime already applied it; dsh must not
// override it).
func Select(getenv func(string) string) (floor int64, ok bool) {
	if getenv(EnvVar) != "" {
		return 0, false
	}
	return DefaultFloor, true
}

// Limiter keeps the process's memory limit at its floor or above the
// live heap, re-evaluated after each garbage collection. A process has
// at most one (Apply makes it).
type Limiter struct {
	floor   int64
	stopped atomic.Bool
	// last is the limit last set; only the finalizer goroutine (or
	// Apply, before it arms) writes it.
	last    atomic.Int64
	samples []metrics.Sample
	// onGC, for tests, is called after each re-evaluation.
	onGC func(limit int64)
}

// metric names read after each collection.
var names = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
}

// Apply sets the default soft memory limit unless GOMEMLIMIT is set, and
// keeps it above the live heap for the rest of the process. It returns
// nil when the environment chose instead.
func Apply(getenv func(string) string) *Limiter { return apply(getenv, nil) }

func apply(getenv func(string) string, onGC func(int64)) *Limiter {
	floor, ok := Select(getenv)
	if !ok {
		return nil
	}
	l := &Limiter{floor: floor, onGC: onGC}
	for _, n := range names {
		l.samples = append(l.samples, metrics.Sample{Name: n})
	}
	l.last.Store(floor)
	debug.SetMemoryLimit(floor)
	l.arm()
	return l
}

// Stop ends the re-evaluation at the next collection and lifts the
// limit (the runtime's default, no limit); for tests, which share their
// process with others.
func (l *Limiter) Stop() {
	l.stopped.Store(true)
	debug.SetMemoryLimit(math.MaxInt64)
}

// Limit returns the limit last set.
func (l *Limiter) Limit() int64 { return l.last.Load() }

// String describes the limiter for diagnostics.
func (l *Limiter) String() string {
	return fmt.Sprintf("memory limit floor %d MiB, now %d MiB", l.floor>>20, l.last.Load()>>20)
}

// gcSentinel is an object nothing references: its finalizer runs after
// the collection that finds it unreachable, once per GC cycle. It holds
// a pointer so the runtime's tiny allocator (which can delay finalizers
// indefinitely) does not place it.
type gcSentinel struct{ l *Limiter }

func (l *Limiter) arm() {
	runtime.SetFinalizer(&gcSentinel{l: l}, func(s *gcSentinel) { s.l.afterGC() })
}

// afterGC runs on the runtime's finalizer goroutine, one cycle at a
// time.
func (l *Limiter) afterGC() {
	if l.stopped.Load() {
		return
	}
	metrics.Read(l.samples)
	v := func(i int) int64 {
		if l.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(l.samples[i].Value.Uint64())
	}
	live := v(0)
	// What the limit counts besides live objects and free pages (which
	// the runtime returns to the OS to meet the limit): the unused room
	// of spans in use, stacks, runtime metadata. Measured at ~11 MiB for
	// a 14 MiB live heap: leaving it out would let a limit of 1.5× the
	// live heap make the collector run every step.
	overhead := v(1) - v(2) - v(3) - v(4)
	limit := LimitFor(l.floor, live, overhead)
	// Setting the limit is cheap but not free; a change under 1 MiB
	// does not matter.
	if d := limit - l.last.Load(); d > 1<<20 || d < -(1<<20) {
		debug.SetMemoryLimit(limit)
		l.last.Store(limit)
	}
	if l.onGC != nil {
		l.onGC(l.last.Load())
	}
	l.arm()
}

// LimitFor is the limit for a live heap and the rest of the memory the
// limit counts: the floor, or the live heap plus half of it and that
// overhead when that is more.
func LimitFor(floor, live, overhead int64) int64 {
	return max(floor, overhead+live+live/2)
}
