package sqlite

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/dsh-dev/dsh/internal/store"
)

// Schedules and deliveries: stored, listed oldest first, fire times only
// move forward, a delivery id is recorded once; a version-6 file gains the
// tables when opened.
func TestAutomationTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dsh.db")
	s := openAt(t, path)
	// Make it a version-6 store without the automation tables.
	rawExec(t, s, `DROP TABLE schedules`)
	rawExec(t, s, `DROP TABLE webhook_deliveries`)
	rawExec(t, s, `PRAGMA user_version = 6`)
	s.Close()
	s = openAt(t, path)
	ctx := t.Context()
	for i, id := range []string{"b", "a"} {
		if err := s.PutSchedule(ctx, store.ScheduleRecord{ID: id, Data: []byte(`{}`), CreatedAt: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutSchedule(ctx, store.ScheduleRecord{ID: "a", Data: []byte(`{}`)}); err == nil {
		t.Error("a duplicate schedule id was stored")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.MarkFired(ctx, "a", 50))
	must(s.MarkFired(ctx, "a", 40))
	recs, err := s.ListSchedules(ctx)
	if err != nil || len(recs) != 2 || recs[0].ID != "b" || recs[1].LastFire != 50 {
		t.Fatalf("schedules %+v %v", recs, err)
	}
	must(s.DeleteSchedule(ctx, "b"))
	if err := s.DeleteSchedule(ctx, "b"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("second delete: %v", err)
	}
	fresh, err := s.RecordDelivery(ctx, store.Delivery{ID: "d1", Event: "pull_request", Outcome: "accepted"})
	if err != nil || !fresh {
		t.Fatalf("first record: %v %v", fresh, err)
	}
	if fresh, err = s.RecordDelivery(ctx, store.Delivery{ID: "d1", Event: "pull_request", Outcome: "accepted"}); err != nil || fresh {
		t.Fatalf("redelivery: %v %v", fresh, err)
	}
	must(s.SetDeliveryOutcome(ctx, "d1", "session", "sess-1"))
	if d, ok, err := s.GetDelivery(ctx, "d1"); err != nil || !ok || d.Outcome != "session" || d.SessionID != "sess-1" {
		t.Fatalf("delivery %+v %v %v", d, ok, err)
	}
	if _, ok, err := s.GetDelivery(ctx, "nope"); err != nil || ok {
		t.Fatalf("unknown delivery: %v %v", ok, err)
	}
}

// A delivery's content key is claimed once, also across a reopen: a
// replay under a new delivery id learns the first delivery's id. A
// version-9 file gains the table when opened (the migration is
// idempotent: run again over a file that has it, it changes nothing).
func TestDeliveryKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dsh.db")
	s := openAt(t, path)
	rawExec(t, s, `DROP TABLE webhook_delivery_keys`)
	rawExec(t, s, `PRAGMA user_version = 9`)
	s.Close()
	s = openAt(t, path)
	ctx := t.Context()
	if owner, fresh, err := s.ClaimDeliveryKey(ctx, "k1", "d1"); err != nil || !fresh || owner != "d1" {
		t.Fatalf("first claim: %q %v %v", owner, fresh, err)
	}
	rawExec(t, s, `PRAGMA user_version = 9`)
	s.Close()
	s = openAt(t, path)
	if owner, fresh, err := s.ClaimDeliveryKey(ctx, "k1", "d2"); err != nil || fresh || owner != "d1" {
		t.Fatalf("replay: %q %v %v", owner, fresh, err)
	}
	if owner, fresh, err := s.ClaimDeliveryKey(ctx, "k2", "d2"); err != nil || !fresh || owner != "d2" {
		t.Fatalf("other key: %q %v %v", owner, fresh, err)
	}
}
