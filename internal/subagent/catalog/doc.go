// Package catalog is the parent-owned subagent catalog: which children a
// session delegated to, read from the parent's own log, and the listings
// built on it (direct children, the descendant tree, the list_agents
// tool and the tree view of `dsh sessions tree`).
//
// # The catalog
//
// The service appends subagent/start to the PARENT's log when a run has
// started; that event is the durable fact "this session created that
// child". [Unit] is the projection "subagentCatalog" folding those events
// into one [Entry] per child, in parent event order. A fork child's log
// begins with a copy of its parent's events (header SeedLength), and the
// subagent/start events in that copy name the parent's children, not the
// fork's, so the fold ignores every event below the seed length: the
// catalog holds only facts the session itself recorded.
//
// # Listing
//
// [ListChildren] and [ListDescendants] read catalogs only: the parent's,
// then each child's (for HasChildren and for the next level). A catalog
// is read from the live log when the session is live in this process
// ([Live]), else from the store with one cold, read-only inspection
// ([Store]); no agent is ever loaded or resumed, and no child log is
// repaired. Sessions absent from every reachable catalog (ordinary forks,
// anything below them) are not discovered: membership is what parents
// recorded, not what headers claim.
//
// A child whose own catalog cannot be read still gets its row, with a
// diagnostic instead of silence: "corrupt" when the log is unreadable by
// this build (a format error, or a header that names another parent) and
// "unavailable" when it could not be read at all (not found, I/O). Only
// that branch stops. A root that cannot be read, and cancellation, fail
// the whole listing instead, because a partial tree presented as complete
// would mislead.
//
// Activity ("running" or "inactive") says only whether the session is
// running in this process right now. It is neither an outcome nor a
// promise that a message would be accepted.
package catalog
