package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestSelectDefault(t *testing.T) {
	floor, ok := Select(env(nil))
	if !ok || floor != DefaultFloor {
		t.Fatalf("Select() = %d, %v; want %d, true", floor, ok, DefaultFloor)
	}
}

func TestSelectRespectsGOMEMLIMIT(t *testing.T) {
	for _, v := range []string{"off", "100MiB", "1GiB", "12345"} {
		if floor, ok := Select(env(map[string]string{"GOMEMLIMIT": v})); ok {
			t.Errorf("GOMEMLIMIT=%s: Select() = %d, true; want the environment's choice kept", v, floor)
		}
	}
}

func TestLimitFor(t *testing.T) {
	for _, c := range []struct{ live, overhead, want int64 }{
		{0, 0, DefaultFloor},
		{8 << 20, 2 << 20, DefaultFloor},         // 14 MiB < floor
		{40 << 20, 4 << 20, (4 + 40 + 20) << 20}, // above: live and a half
	} {
		if got := LimitFor(DefaultFloor, c.live, c.overhead); got != c.want {
			t.Errorf("LimitFor(%d, %d) = %d, want %d", c.live, c.overhead, got, c.want)
		}
	}
}

// The process's limit, restored after a test (tests share the process).
func keepLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
}

func TestApplyLeavesGOMEMLIMIT(t *testing.T) {
	keepLimit(t)
	debug.SetMemoryLimit(math.MaxInt64)
	if l := Apply(env(map[string]string{"GOMEMLIMIT": "off"})); l != nil {
		l.Stop()
		t.Fatal("Apply with GOMEMLIMIT set returned a limiter")
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit = %d after Apply with GOMEMLIMIT set; want it untouched", got)
	}
}

// sink keeps the test's big heap live across collections.
var sink [][]byte

func TestApplySetsFloorAndFollowsLiveHeap(t *testing.T) {
	keepLimit(t)
	seen := make(chan int64, 16)
	l := apply(env(nil), func(limit int64) {
		select {
		case seen <- limit:
		default:
		}
	})
	if l == nil {
		t.Fatal("Apply without GOMEMLIMIT returned nil")
	}
	defer l.Stop()
	if got := debug.SetMemoryLimit(-1); got != DefaultFloor {
		t.Fatalf("limit = %d, want the default %d", got, DefaultFloor)
	}
	// A live heap of 64 MiB, twice the floor: the limit must rise above
	// it, or the collector would run back to back.
	for range 64 {
		sink = append(sink, make([]byte, 1<<20))
	}
	defer func() { sink = nil }()
	const want = 64 << 20 * 3 / 2
	for {
		runtime.GC()
		if got := <-seen; got >= want {
			break
		}
	}
	if got := debug.SetMemoryLimit(-1); got < want || l.Limit() != got {
		t.Fatalf("limit = %d (limiter says %d), want ≥ %d with 64 MiB live", got, l.Limit(), want)
	}
	// The heap shrinks: the limit comes back down to the floor.
	sink = nil
	for {
		runtime.GC()
		if got := <-seen; got == DefaultFloor {
			break
		}
	}
}
