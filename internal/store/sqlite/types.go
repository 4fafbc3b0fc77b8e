package sqlite

import "github.com/dsh-dev/dsh/internal/store"

// The store's types and errors live in package store, shared by every
// store implementation; these aliases keep this package's names for them.
type (
	Entry            = store.Entry
	ListFilter       = store.ListFilter
	SeqConflictError = store.SeqConflictError
	Candidate        = store.Candidate
	IDError          = store.IDError
	Owner            = store.Owner
	BusyError        = store.BusyError
	LeaseLostError   = store.LeaseLostError
)

// Sentinel errors, from package store.
var (
	ErrNotFound    = store.ErrNotFound
	ErrExists      = store.ErrExists
	ErrSeqConflict = store.ErrSeqConflict
	ErrCorrupt     = store.ErrCorrupt
	ErrAmbiguous   = store.ErrAmbiguous
	ErrBusy        = store.ErrBusy
	ErrLeaseLost   = store.ErrLeaseLost
)

// Codes and statuses, from package store.
const (
	CodeSessionNotFound  = store.CodeSessionNotFound
	CodeSessionAmbiguous = store.CodeSessionAmbiguous
	CodeSessionBusy      = store.CodeSessionBusy
	CodeLeaseLost        = store.CodeLeaseLost
	MaxCandidates        = store.MaxCandidates
	StatusNew            = store.StatusNew
	StatusRunning        = store.StatusRunning
	StatusInterrupted    = store.StatusInterrupted
)

// Interface checks.
var (
	_ store.Store = (*Store)(nil)
	_ store.Lease = (*Lease)(nil)
)
