package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

func TestOpenCreatesPrivateFilesAndIsIdempotent(t *testing.T) {
	s, path := newStore(t)
	mustCreate(t, s, "a")
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v %v", fi.Mode(), err)
	}
	var mode string
	var version int
	if err := s.r.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	if err := s.r.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != schemaVersion {
		t.Fatalf("user_version = %d, %v", version, err)
	}
	// Reopening (another process, or a restart) keeps the data.
	s2 := openAt(t, path)
	if _, err := s2.Header(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	// A schema from the future is refused rather than misread.
	rawExec(t, s, `PRAGMA user_version = 99`)
	if _, err := Open(context.Background(), path); err == nil {
		t.Fatal("Open accepted a newer schema")
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	h := hdr("s1")
	h.ParentSession = "p0"
	n := int64(2)
	h.SeedLength = &n
	h.DelegationDepth = 1
	if err := s.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	want := simpleLog(t)
	mustAppend(t, s, "s1", want[:3]...)
	mustAppend(t, s, "s1", want[3:]...)

	gotH, got, err := s.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotH, h) {
		t.Fatalf("header = %+v, want %+v", gotH, h)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events differ:\n got %+v\nwant %+v", got, want)
	}
	suffix, err := s.ReadFrom(ctx, "s1", 4)
	if err != nil || !reflect.DeepEqual(suffix, want[4:]) {
		t.Fatalf("ReadFrom(4) = %+v, %v", suffix, err)
	}
	if past, err := s.ReadFrom(ctx, "s1", 100); err != nil || len(past) != 0 {
		t.Fatalf("ReadFrom(100) = %v, %v", past, err)
	}
	if _, err := s.ReadFrom(ctx, "s1", -1); err == nil {
		t.Fatal("ReadFrom(-1) succeeded")
	}
	// Pages of 3 put the log back together; a page past the end is empty.
	var paged []session.Event
	for from := int64(0); ; {
		page, err := s.ReadPage(ctx, "s1", from, 3)
		if err != nil {
			t.Fatalf("ReadPage(%d): %v", from, err)
		}
		if len(page) > 3 {
			t.Fatalf("ReadPage(%d, 3) = %d events", from, len(page))
		}
		paged = append(paged, page...)
		if len(page) < 3 {
			break
		}
		from += 3
	}
	if !reflect.DeepEqual(paged, want) {
		t.Fatalf("pages differ:\n got %+v\nwant %+v", paged, want)
	}
	if past, err := s.ReadPage(ctx, "s1", 100, 3); err != nil || len(past) != 0 {
		t.Fatalf("ReadPage(100) = %v, %v", past, err)
	}
	for _, bad := range [][2]int64{{-1, 3}, {0, 0}} {
		if _, err := s.ReadPage(ctx, "s1", bad[0], int(bad[1])); err == nil {
			t.Fatalf("ReadPage(%d, %d) succeeded", bad[0], bad[1])
		}
	}
	if hh, err := s.Header(ctx, "s1"); err != nil || !reflect.DeepEqual(hh, h) {
		t.Fatalf("Header = %+v, %v", hh, err)
	}
	if err := s.Create(ctx, h); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate Create: %v", err)
	}
	for _, bad := range []session.Header{{Version: session.FormatVersion}, {Version: 7, ID: "x"}} {
		if err := s.Create(ctx, bad); err == nil {
			t.Fatalf("Create(%+v) succeeded", bad)
		}
	}
	for _, err := range []error{
		func() error { _, _, err := s.Load(ctx, "nope"); return err }(),
		func() error { _, _, err := s.Inspect(ctx, "nope"); return err }(),
		func() error { _, err := s.ReadFrom(ctx, "nope", 0); return err }(),
		func() error { _, err := s.Header(ctx, "nope"); return err }(),
		s.Append(ctx, "nope", want[:1]),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown session: %v", err)
		}
	}
}

func TestListNewestFirst(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	clock := int64(1000)
	s.now = func() int64 { clock++; return clock }
	for _, id := range []string{"a", "b", "c"} {
		mustCreate(t, s, id)
	}
	mustAppend(t, s, "a", simpleLog(t)[:2]...) // a becomes the newest
	got, err := s.List(ctx, ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		ids = append(ids, fmt.Sprintf("%s:%d", e.Header.ID, e.Events))
	}
	if fmt.Sprint(ids) != "[a:2 c:0 b:0]" {
		t.Fatalf("List = %v", ids)
	}
	if got[0].UpdatedAt != 1004 || got[0].Header.Cwd != "/work/project" {
		t.Fatalf("entry = %+v", got[0])
	}
}

func TestAppendSeqConflicts(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	log := simpleLog(t)
	mustAppend(t, s, "s", log[:2]...)

	var sc *SeqConflictError
	// The first seq must be the stored next seq: a replay and a skip both
	// fail.
	for _, batch := range [][]session.Event{log[1:3], log[3:5]} {
		err := s.Append(ctx, "s", batch)
		if !errors.Is(err, ErrSeqConflict) || !errors.As(err, &sc) || sc.Want != 2 || sc.Got != batch[0].Seq {
			t.Fatalf("Append(first seq %d) = %v", batch[0].Seq, err)
		}
		if !strings.Contains(err.Error(), "session s:") {
			t.Fatalf("error does not name the session: %v", err)
		}
	}
	// A gap inside the batch is refused before anything is written.
	gap := []session.Event{log[2], log[3], log[5]}
	if err := s.Append(ctx, "s", gap); !errors.As(err, &sc) || sc.Want != 4 || sc.Got != 5 {
		t.Fatalf("Append(gap) = %v", err)
	}
	if n := rowCount(t, s, "s"); n != 2 {
		t.Fatalf("rows = %d after refused appends", n)
	}
	mustAppend(t, s, "s", log[2:]...)
	if err := s.Append(ctx, "s", nil); err != nil {
		t.Fatalf("empty append: %v", err)
	}
}

func TestAppendValidateRejectsWholeBatch(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	mustCreate(t, s, "s")
	log := simpleLog(t)
	unknown := session.Event{Type: "future/thing", Seq: 2, Data: json.RawMessage(`{}`)}
	noOp := log[4]
	noOp.Seq, noOp.SurfaceOp = 2, nil
	dupKey := session.Event{Type: session.TypeTurnStart, Seq: 2, Data: json.RawMessage(`{"turn":1,"turn":2}`)}
	for _, bad := range []session.Event{unknown, noOp, dupKey} {
		batch := []session.Event{log[0], log[1], bad}
		if err := s.Append(ctx, "s", batch); err == nil || errors.Is(err, ErrSeqConflict) {
			t.Fatalf("Append(%s) = %v", bad.Type, err)
		}
		if n := rowCount(t, s, "s"); n != 0 {
			t.Fatalf("rows = %d after a rejected batch", n)
		}
	}
	// In a large batch the first chunks are inserted while later ones are
	// still being validated: an invalid event late in the batch must roll
	// back the rows already inserted.
	big := make([]session.Event, 300)
	for i := range big {
		big[i] = ev(t, int64(i), session.TypeEndSeed, struct{}{})
	}
	big[250] = unknown
	big[250].Seq = 250
	err := s.Append(ctx, "s", big)
	if err == nil || !strings.Contains(err.Error(), "future/thing") {
		t.Fatalf("Append(big) = %v", err)
	}
	if n := rowCount(t, s, "s"); n != 0 {
		t.Fatalf("rows = %d after a rejected large batch", n)
	}
	big[250] = ev(t, 250, session.TypeEndSeed, struct{}{})
	mustAppend(t, s, "s", big...)
	if n := rowCount(t, s, "s"); n != 300 {
		t.Fatalf("rows = %d, want 300", n)
	}
}

// TestTwoStoresRace runs two Stores (as two processes would) appending to
// one session from several goroutines: every append either lands at the
// next seq or fails with a seq conflict, and the log stays contiguous.
func TestTwoStoresRace(t *testing.T) {
	ctx := context.Background()
	s1, path := newStore(t)
	s2 := openAt(t, path)
	mustCreate(t, s1, "s")

	// Both try seq 0: exactly one wins.
	first := ev(t, 0, session.TypeEndSeed, struct{}{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*Store{s1, s2} {
		wg.Go(func() { errs[i] = s.Append(ctx, "s", []session.Event{first}) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), ErrSeqConflict) {
		t.Fatalf("racing first appends: %v", errs)
	}

	const target = 60
	var mu sync.Mutex
	wins := 1
	for i := range 4 {
		s := []*Store{s1, s2}[i%2]
		wg.Go(func() {
			for {
				events, err := s.ReadFrom(ctx, "s", 0)
				if err != nil {
					t.Error(err)
					return
				}
				next := int64(len(events))
				if next >= target {
					return
				}
				batch := []session.Event{
					ev(t, next, session.TypeLLMRetryStart, session.LLMRetryStarted{RetryID: fmt.Sprint(i)}),
					ev(t, next+1, session.TypeEndSeed, struct{}{}),
				}
				err = s.Append(ctx, "s", batch)
				if err != nil && !errors.Is(err, ErrSeqConflict) {
					t.Error(err)
					return
				}
				if err == nil {
					mu.Lock()
					wins += 2
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	_, events, err := s2.Load(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != wins || len(events) < target {
		t.Fatalf("log has %d events, %d appended", len(events), wins)
	}
}

// TestConcurrentUse exercises one Store from many goroutines at once:
// appends to separate sessions interleaved with reads and listings.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			id := fmt.Sprint("g", g)
			if err := s.Create(ctx, hdr(id)); err != nil {
				t.Error(err)
				return
			}
			log := simpleLog(t)
			for i := range log {
				if err := s.Append(ctx, id, log[i:i+1]); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.List(ctx, ListFilter{}); err != nil {
					t.Error(err)
				}
				// Inspect, not Load: Load would close the turn this
				// goroutine is still writing.
				if _, _, err := s.Inspect(ctx, id); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	list, err := s.List(ctx, ListFilter{})
	if err != nil || len(list) != 6 {
		t.Fatalf("List = %d entries, %v", len(list), err)
	}
}

// Every connection of both pools gets the smaller page cache (issue 12:
// three default caches were ~6 MB of a long run's resident set).
func TestConnectionsUseSmallPageCache(t *testing.T) {
	s, _ := newStore(t)
	for name, db := range map[string]*sql.DB{"writer": s.w, "reader": s.r} {
		var kib int
		if err := db.QueryRowContext(context.Background(), "PRAGMA cache_size").Scan(&kib); err != nil {
			t.Fatal(err)
		}
		if kib != -512 {
			t.Errorf("%s: cache_size = %d, want -512 (512 KiB)", name, kib)
		}
	}
}

// TestOneMigrationPerVersion: the migration table takes a new file to
// exactly schemaVersion, one step per version.
func TestOneMigrationPerVersion(t *testing.T) {
	if len(migrations) != schemaVersion {
		t.Fatalf("%d migrations for schema version %d", len(migrations), schemaVersion)
	}
	for i, m := range migrations {
		if m.sql == "" && m.then == nil {
			t.Errorf("migration to version %d does nothing", i+1)
		}
	}
}
