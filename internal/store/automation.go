package store

import (
	"context"
	"errors"
)

// Automation storage: scheduled runs and webhook deliveries. The store
// keeps them opaque (a schedule is JSON the schedule package owns); every
// call is one transaction.

// ErrScheduleNotFound reports a schedule id the store does not hold.
var ErrScheduleNotFound = errors.New("schedule not found")

// ScheduleRecord is one stored schedule.
type ScheduleRecord struct {
	ID string
	// Data is the schedule's definition (JSON).
	Data []byte
	// CreatedAt and LastFire are Unix milliseconds (LastFire 0: never
	// fired).
	CreatedAt int64
	LastFire  int64
}

// Schedules stores scheduled runs.
type Schedules interface {
	// PutSchedule stores a new schedule.
	PutSchedule(ctx context.Context, r ScheduleRecord) error
	// ListSchedules returns every schedule, oldest first.
	ListSchedules(ctx context.Context) ([]ScheduleRecord, error)
	// DeleteSchedule removes schedule id ([ErrScheduleNotFound]).
	DeleteSchedule(ctx context.Context, id string) error
	// MarkFired records that schedule id fired at fireTime (Unix ms); an
	// older time than the stored one changes nothing.
	MarkFired(ctx context.Context, id string, fireTime int64) error
}

// Delivery is one accepted webhook delivery.
type Delivery struct {
	// ID is the sender's delivery id (X-GitHub-Delivery).
	ID    string
	Event string
	// ReceivedAt is Unix milliseconds.
	ReceivedAt int64
	// Outcome is what became of it ("accepted", "ignored: …", "session",
	// "failed: …"); SessionID the session it started, if any.
	Outcome   string
	SessionID string
}

// Deliveries records webhook deliveries so that a redelivery starts
// nothing.
type Deliveries interface {
	// RecordDelivery stores d unless its id is already stored; fresh
	// reports whether it was new.
	RecordDelivery(ctx context.Context, d Delivery) (fresh bool, err error)
	// SetDeliveryOutcome updates the outcome and session of delivery id.
	SetDeliveryOutcome(ctx context.Context, id, outcome, sessionID string) error
	// GetDelivery returns delivery id (ok false when unknown).
	GetDelivery(ctx context.Context, id string) (d Delivery, ok bool, err error)
	// ClaimDeliveryKey stores key (what a delivery's signed body asks
	// for: event, action, repository, pull request, head commit, comment)
	// for delivery id unless it is stored already; owner is the delivery
	// that claimed it first and fresh whether that is this one. The
	// delivery id is not signed: a replayed body under a new id claims
	// the same key.
	ClaimDeliveryKey(ctx context.Context, key, id string) (owner string, fresh bool, err error)
}
