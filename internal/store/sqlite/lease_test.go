package sqlite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/session/sessiontest"
	"github.com/dsh-dev/dsh/internal/store"
)

func mustAcquire(t *testing.T, s *Store, id, label string) *Lease {
	t.Helper()
	l, err := s.acquire(context.Background(), id, label)
	if err != nil {
		t.Fatalf("Acquire %s: %v", id, err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// renewers counts goroutines in a lease's renewal loop.
func renewers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "sqlite.(*Lease).renewLoop")
}

func TestLeaseBusyNamesTheHolder(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	mustCreate(t, s, "s")
	first := mustAcquire(t, s, "s", "dsh run")
	// A second process (another Store on the same file) is refused at
	// once, with the holder named.
	other := openAt(t, path)
	_, err := other.Acquire(ctx, "s", "dsh serve")
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) || busy.Code() != CodeSessionBusy {
		t.Fatalf("second Acquire = %v", err)
	}
	host, _ := os.Hostname()
	msg := err.Error()
	for _, want := range []string{"session s is in use by dsh run", "pid " + strconv.Itoa(os.Getpid()), "on " + host, "since "} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "seq") {
		t.Errorf("message leaks internals: %q", msg)
	}
	// Writes outside the lease are refused too, and write nothing.
	if err := other.Append(ctx, "s", []session.Event{ev(t, 0, session.TypeEndSeed, struct{}{})}); !errors.Is(err, ErrBusy) {
		t.Fatalf("plain append to a held session = %v", err)
	}
	if n := rowCount(t, s, "s"); n != 0 {
		t.Fatalf("refused append wrote %d rows", n)
	}
	// The holder writes; after Release the session is free again, with a
	// higher epoch, and the old lease can no longer write.
	if err := first.Append(ctx, "s", []session.Event{ev(t, 0, session.TypeEndSeed, struct{}{})}); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if n := renewers(); n != 0 {
		t.Fatalf("%d renewal goroutines after Release", n)
	}
	second := mustAcquire(t, other, "s", "dsh serve")
	if second.Epoch() <= first.Epoch() {
		t.Fatalf("epoch %d after %d", second.Epoch(), first.Epoch())
	}
	if _, took := second.TookOverFrom(); took {
		t.Error("a released lease counted as a takeover")
	}
	var lost *LeaseLostError
	if err := first.Append(ctx, "s", []session.Event{ev(t, 1, session.TypeEndSeed, struct{}{})}); !errors.As(err, &lost) || lost.Code() != CodeLeaseLost {
		t.Fatalf("append through a released lease = %v", err)
	}
	if _, err := s.acquire(ctx, "nope", "dsh run"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Acquire of an unknown session = %v", err)
	}
}

// TestLeaseTakeoverAfterExpiry: a holder that stopped renewing (hung, or
// on another host) loses the session once its lease expires; the new
// holder repairs the crashed log, and the stale holder can write nothing
// after the takeover.
func TestLeaseTakeoverAfterExpiry(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	mustCreate(t, s, "s")
	stale := mustAcquire(t, s, "s", "dsh run")
	mustAppendLease(t, stale, crashedLog(t)...)

	other := openAt(t, path)
	now := time.Now().Add(DefaultLeaseTTL + time.Second).UnixMilli()
	other.now = func() int64 { return now }
	fresh, err := other.Acquire(ctx, "s", "dsh run")
	if err != nil {
		t.Fatalf("takeover of an expired lease: %v", err)
	}
	defer fresh.Release(ctx)
	if prev, took := fresh.TookOverFrom(); !took || prev.PID != os.Getpid() || prev.Label != "dsh run" {
		t.Fatalf("TookOverFrom = %+v, %v", prev, took)
	}
	_, events, err := fresh.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sessiontest.CheckBalanced(t, events)
	// The stale holder: its appends and renewals fail, and write nothing.
	before := rowCount(t, s, "s")
	var lost *LeaseLostError
	err = stale.Append(ctx, "s", []session.Event{ev(t, before, session.TypeEndSeed, struct{}{})})
	if !errors.As(err, &lost) || lost.Holder == nil || lost.Holder.Label != "dsh run" {
		t.Fatalf("stale append = %v", err)
	}
	if err := stale.Renew(ctx); !errors.Is(err, ErrLeaseLost) || !errors.Is(stale.Err(), ErrLeaseLost) {
		t.Fatalf("stale renew = %v, Err = %v", err, stale.Err())
	}
	if n := rowCount(t, s, "s"); n != before {
		t.Fatalf("stale holder wrote: %d rows, want %d", n, before)
	}
	// Its Release does not free the new holder's session.
	if err := stale.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.acquire(ctx, "s", "dsh run"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire after the stale Release = %v", err)
	}
	if err := fresh.Append(ctx, "s", []session.Event{ev(t, before, session.TypeEndSeed, struct{}{})}); err != nil {
		t.Fatal(err)
	}
}

func mustAppendLease(t *testing.T, l *Lease, events ...session.Event) {
	t.Helper()
	if err := l.Append(context.Background(), l.SessionID(), events); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseTakeoverOfDeadHolder: a lease whose holder is provably dead
// on this host (its pid is gone, or is now another process) is taken
// over at once, before it expires.
func TestLeaseTakeoverOfDeadHolder(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	host, _ := os.Hostname()
	me := Self("dsh run")
	if me.Start == "" {
		t.Skip("no /proc: only expiry frees a lease here")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	far := time.Now().Add(time.Hour).UnixMilli()
	for name, o := range map[string]Owner{
		"pid gone":   {PID: dead.Process.Pid, Host: host, Start: me.Start, Label: "dsh run"},
		"pid reused": {PID: os.Getpid(), Host: host, Start: me.Start + "0", Label: "dsh run"},
	} {
		t.Run(name, func(t *testing.T) {
			id := "s-" + strings.ReplaceAll(name, " ", "-")
			mustCreate(t, s, id)
			rawExec(t, s, `INSERT INTO leases VALUES (?, 7, 1, ?, ?, ?, ?, 1, ?)`, id, o.PID, o.Host, o.Start, o.Label, far)
			l, err := s.acquire(ctx, id, "dsh run")
			if err != nil {
				t.Fatalf("takeover of a dead holder: %v", err)
			}
			defer l.Release(ctx)
			if prev, took := l.TookOverFrom(); !took || prev.PID != o.PID || l.Epoch() != 8 {
				t.Fatalf("TookOverFrom = %+v, %v; epoch %d", prev, took, l.Epoch())
			}
		})
	}
	t.Run("other host", func(t *testing.T) {
		mustCreate(t, s, "remote")
		rawExec(t, s, `INSERT INTO leases VALUES ('remote', 1, 1, ?, 'elsewhere.example', ?, 'dsh serve', 1, ?)`, dead.Process.Pid, me.Start, far)
		if _, err := s.acquire(ctx, "remote", "dsh run"); !errors.Is(err, ErrBusy) {
			t.Fatalf("a lease held on another host was taken before expiry: %v", err)
		}
	})
}

// TestLeaseRenewal: while held, the lease is renewed every third of its
// TTL and so never expires; its renewal goroutine ends with Release.
func TestLeaseRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, path := newStore(t)
		s.leaseTTL = 3 * time.Second
		mustCreate(t, s, "s")
		l, err := s.acquire(ctx, "s", "dsh run")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx) // ends the renewal goroutine even on failure
		other := openAt(t, path)
		for range 5 {
			// Two TTLs pass in total; without renewal the lease would
			// have expired.
			time.Sleep(1200 * time.Millisecond)
			synctest.Wait()
			if _, err := other.Acquire(ctx, "s", "dsh run"); !errors.Is(err, ErrBusy) {
				t.Fatalf("renewed lease taken: %v", err)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := renewers(); n != 0 {
			t.Fatalf("%d renewal goroutines after Release", n)
		}
		l2, err := other.Acquire(ctx, "s", "dsh run")
		if err != nil {
			t.Fatal(err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSchemaV1Migrates: a version-1 database gains the leases table.
func TestSchemaV1Migrates(t *testing.T) {
	s, path := newStore(t)
	mustCreate(t, s, "s")
	rawExec(t, s, `DROP TABLE leases`)
	dropSummaryColumns(t, s)
	rawExec(t, s, `PRAGMA user_version = 1`)
	s.Close()
	s2 := openAt(t, path)
	l := mustAcquire(t, s2, "s", "dsh run")
	if l.Epoch() != 1 {
		t.Fatalf("epoch %d", l.Epoch())
	}
}

// TestCreateLeasedIsCreateThenAcquire: the one-transaction creation of a
// leased session stores what Create then Acquire store, and fails as
// Create fails, leaving nothing behind.
func TestCreateLeasedIsCreateThenAcquire(t *testing.T) {
	ctx := context.Background()
	s, path := newStore(t)
	l, err := s.CreateLeased(ctx, hdr("a"), "dsh run")
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "b")
	ref := mustAcquire(t, s, "b", "dsh run")
	if l.Epoch() != ref.Epoch() || l.Owner().Label != "dsh run" || l.Owner().PID != ref.Owner().PID {
		t.Fatalf("lease epoch %d owner %+v, Create+Acquire gives %d %+v", l.Epoch(), l.Owner(), ref.Epoch(), ref.Owner())
	}
	if _, took := l.TookOverFrom(); took {
		t.Error("a new session's lease counted as a takeover")
	}
	a, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Get(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.StatusRunning || a.Status != b.Status || a.Events != b.Events || a.Turns != b.Turns {
		t.Fatalf("entry %+v, Create+Acquire gives %+v", a, b)
	}
	// Held: another process is refused, and the holder writes.
	other := openAt(t, path)
	var busy *BusyError
	if _, err := other.Acquire(ctx, "a", "dsh serve"); !errors.As(err, &busy) || busy.Holder.Label != "dsh run" {
		t.Fatalf("Acquire of a CreateLeased session = %v", err)
	}
	if err := l.Append(ctx, "a", []session.Event{ev(t, 0, session.TypeEndSeed, struct{}{})}); err != nil {
		t.Fatal(err)
	}
	// An id already stored fails as Create does and leaves the lease as
	// it was; so does a header Create refuses.
	if _, err := s.CreateLeased(ctx, hdr("a"), "dsh serve"); !errors.Is(err, ErrExists) {
		t.Fatalf("CreateLeased of a stored id = %v", err)
	}
	if _, err := other.Acquire(ctx, "a", "dsh serve"); !errors.As(err, &busy) || busy.Holder.Label != "dsh run" {
		t.Fatalf("after a refused CreateLeased, Acquire = %v", err)
	}
	bad := hdr("c")
	bad.Version++
	if _, err := s.CreateLeased(ctx, bad, "dsh run"); err == nil {
		t.Fatal("CreateLeased took a header of another format version")
	}
	if _, err := s.Get(ctx, "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused header was stored: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ref.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := renewers(); n != 0 {
		t.Fatalf("%d renewal goroutines after Release", n)
	}
}
