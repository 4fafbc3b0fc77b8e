package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/store"
)

// Approval policies a schedule may use: nobody is there to answer an ask.
const (
	ApprovalNever = "never"
	ApprovalAuto  = "auto"
)

// Schedule is one stored scheduled run.
type Schedule struct {
	ID         string `json:"id"`
	Spec       Spec   `json:"spec"`
	Cwd        string `json:"cwd"`
	Prompt     string `json:"prompt"`
	Model      string `json:"model,omitempty"`
	Permission string `json:"permission,omitempty"`
	// Approval is never (an ask is refused) or auto (the automatic
	// reviewer answers asks under the auto permission preset; what it
	// would hand to a person is unavailable, since the session is
	// headless).
	Approval string `json:"approval"`
	// CreatedAt and LastFire are Unix milliseconds (LastFire 0: never).
	CreatedAt int64 `json:"createdAt"`
	LastFire  int64 `json:"lastFire,omitempty"`
}

// Validate checks a schedule before it is stored.
func (s *Schedule) Validate() error {
	if err := s.Spec.Compile(); err != nil {
		return err
	}
	if strings.TrimSpace(s.Prompt) == "" {
		return errors.New("the prompt is empty")
	}
	if !filepath.IsAbs(s.Cwd) {
		return fmt.Errorf("cwd %q is not absolute", s.Cwd)
	}
	switch s.Approval {
	case ApprovalNever, ApprovalAuto:
	case "ask":
		return errors.New("approval ask is refused: nobody is there to answer a scheduled run (use never or auto)")
	default:
		return fmt.Errorf("unknown approval policy %q (want never or auto)", s.Approval)
	}
	if s.Approval == ApprovalAuto && s.Permission != "" && s.Permission != "auto" {
		return fmt.Errorf("approval auto needs the auto permission preset, not %q", s.Permission)
	}
	return nil
}

// SessionChoices are the permission and approval a firing's session gets.
func (s *Schedule) SessionChoices() (permission, approval string) {
	if s.Approval == ApprovalAuto {
		return "auto", "ask"
	}
	return s.Permission, "never"
}

// NextAfter is the schedule's next fire time after t.
func (s *Schedule) NextAfter(t time.Time) (time.Time, bool, []Skip) {
	return s.Spec.Next(t, time.UnixMilli(s.CreatedAt))
}

// NewID mints a schedule id.
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// Add validates s, fills its id and creation time, and stores it.
func Add(ctx context.Context, st store.Schedules, s *Schedule, now time.Time) error {
	if s.ID == "" {
		s.ID = NewID()
	}
	if s.CreatedAt == 0 {
		s.CreatedAt = now.UnixMilli()
	}
	if err := s.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return st.PutSchedule(ctx, store.ScheduleRecord{ID: s.ID, Data: b, CreatedAt: s.CreatedAt})
}

// BadRecordError is a stored schedule that cannot be read (a damaged row,
// or one written by another version of dsh). It is reported, never fired,
// and can still be removed by its id.
type BadRecordError struct {
	ID  string
	Err error
}

func (e *BadRecordError) Error() string {
	return fmt.Sprintf("schedule %s cannot be read (dsh schedule rm %s removes it): %v", e.ID, e.ID, e.Err)
}

func (e *BadRecordError) Unwrap() error { return e.Err }

// List returns the stored schedules, oldest first. A row that cannot be
// read does not hide the others: they are returned with an error joining
// a *BadRecordError for each bad row.
func List(ctx context.Context, st store.Schedules) ([]Schedule, error) {
	recs, err := st.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Schedule, 0, len(recs))
	var bad []error
	for _, r := range recs {
		s, err := decode(r)
		if err != nil {
			bad = append(bad, &BadRecordError{ID: r.ID, Err: err})
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(bad...)
}

// Get returns schedule id (a unique prefix is enough). A row that cannot
// be read is returned by its exact id as a Schedule with only ID set, with
// its *BadRecordError, so it can be removed.
func Get(ctx context.Context, st store.Schedules, id string) (Schedule, error) {
	all, listErr := List(ctx, st)
	if all == nil && listErr != nil {
		return Schedule{}, listErr
	}
	var bad []*BadRecordError
	for _, e := range unjoin(listErr) {
		var be *BadRecordError
		if errors.As(e, &be) {
			if be.ID == id {
				return Schedule{ID: be.ID}, be
			}
			bad = append(bad, be)
		}
	}
	var found []Schedule
	for _, s := range all {
		if s.ID == id {
			return s, nil
		}
		if id != "" && strings.HasPrefix(s.ID, id) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		for _, be := range bad {
			if id != "" && strings.HasPrefix(be.ID, id) {
				return Schedule{}, fmt.Errorf("schedule %q: %w (give its whole id)", id, be)
			}
		}
		return Schedule{}, fmt.Errorf("schedule %q: %w", id, store.ErrScheduleNotFound)
	case 1:
		return found[0], nil
	}
	return Schedule{}, fmt.Errorf("schedule %q matches %d schedules; give more of its id", id, len(found))
}

// unjoin lists the errors errors.Join joined (err itself otherwise).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func decode(r store.ScheduleRecord) (Schedule, error) {
	var s Schedule
	if err := json.Unmarshal(r.Data, &s); err != nil {
		return Schedule{}, fmt.Errorf("schedule %s: %w", r.ID, err)
	}
	s.LastFire = r.LastFire
	if err := s.Spec.Compile(); err != nil {
		return Schedule{}, fmt.Errorf("schedule %s: %w", r.ID, err)
	}
	return s, nil
}
