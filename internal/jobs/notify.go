package jobs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dsh-dev/dsh/internal/llm"
)

// NoticeSource marks completion notices in the history.
var NoticeSource = llm.Source{Kind: "plugin", Plugin: "jobs", Form: "notice"}

// Notifier defaults.
const (
	// DefaultMaxWakes bounds consecutive self-woken turns per owner: a
	// chain of jobs that each start another must not keep an unattended
	// agent busy forever.
	DefaultMaxWakes = 3
	// DefaultNoticeTail is how many bytes of output a notice quotes.
	DefaultNoticeTail = 2000
)

// Owner is the agent a completion notice goes to, as the composition root
// adapts it.
type Owner interface {
	// Busy reports whether the owner is running a turn now.
	Busy() bool
	// Inject adds model-facing context to the owner's next step without
	// starting a turn.
	Inject(llm.Message) error
	// Wake delivers the message and starts a turn if the owner is idle
	// (steer). If the owner became busy meanwhile it must still deliver
	// it, into the running turn.
	Wake(llm.Message) error
}

// Delivery is what Deliver did with a notice.
type Delivery string

// Deliveries.
const (
	// Skipped: no notice was due (the job runs, was already reported, or
	// its owner is gone).
	Skipped  Delivery = "skipped"
	Injected Delivery = "injected"
	Woken    Delivery = "woken"
)

// Notifier delivers completion notices: to a busy owner the notice is
// injected into its next step; an idle owner is woken with it, but only
// MaxWakes times in a row: a turn a human starts resets the count
// ([Notifier.NoteHumanTurn]), and until then further notices are only
// injected, to be read when the human comes back. Typical wiring:
// registry.OnDone(func(j jobs.Job) { _, _ = notifier.Deliver(j) }).
//
// Set the exported fields before first use; the methods are safe for
// concurrent use. The Owner methods are called without the notifier's
// lock held.
type Notifier struct {
	// Jobs provides the output tail quoted in notices (nil: none).
	Jobs *Registry
	// Owner finds a job's owner; nil (or a nil result) drops the notice.
	Owner func(owner string) Owner
	// MaxWakes is the number of consecutive self-woken turns allowed;
	// 0 means DefaultMaxWakes, negative never wakes.
	MaxWakes int
	// TailBytes is how much output a notice quotes; 0 means
	// DefaultNoticeTail, negative none.
	TailBytes int

	mu    sync.Mutex
	wakes map[string]int // guarded by mu; wakes since the last human turn
}

// Deliver sends j's completion notice to its owner, if one is due, and
// says how. The error is the Owner's.
func (n *Notifier) Deliver(j Job) (Delivery, error) {
	if !j.Status.Terminal() || j.Reported || n.Owner == nil {
		return Skipped, nil
	}
	o := n.Owner(j.Owner)
	if o == nil {
		return Skipped, nil
	}
	var tail []byte
	if size := n.tailBytes(); n.Jobs != nil && size > 0 {
		tail, _ = n.Jobs.Tail(j.ID, size) // a forgotten job has no tail
	}
	msg := Notice(j, tail)

	busy := o.Busy()
	n.mu.Lock()
	wake := !busy && n.wakes[j.Owner] < n.maxWakes()
	if wake {
		// Counted before waking so that concurrent deliveries to one
		// owner cannot all take the last wake.
		if n.wakes == nil {
			n.wakes = map[string]int{}
		}
		n.wakes[j.Owner]++
	}
	n.mu.Unlock()

	if !wake {
		return Injected, o.Inject(msg)
	}
	if err := o.Wake(msg); err != nil {
		n.mu.Lock()
		if n.wakes[j.Owner] > 0 {
			n.wakes[j.Owner]--
		}
		n.mu.Unlock()
		return Woken, err
	}
	return Woken, nil
}

// NoteHumanTurn records that a human started a turn of owner: the next
// notices may wake it again.
func (n *Notifier) NoteHumanTurn(owner string) { n.Forget(owner) }

// Forget drops owner's wake count (its disposal).
func (n *Notifier) Forget(owner string) {
	n.mu.Lock()
	delete(n.wakes, owner)
	n.mu.Unlock()
}

func (n *Notifier) maxWakes() int {
	if n.MaxWakes == 0 {
		return DefaultMaxWakes
	}
	return n.MaxWakes
}

func (n *Notifier) tailBytes() int {
	if n.TailBytes == 0 {
		return DefaultNoticeTail
	}
	return n.TailBytes
}

// Notice is the completion notice for j quoting tail, the end of its
// output: a user-role message with source NoticeSource.
func Notice(j Job, tail []byte) llm.Message {
	var b strings.Builder
	label := j.Kind
	if j.Description != "" {
		label += ": " + j.Description
	}
	fmt.Fprintf(&b, "<system-reminder>\nBackground job %s (%s) finished [status: %s].\n", j.ID, label, j.Summary())
	shown := cleanTail(tail, j.OutputBytes)
	switch {
	case j.OutputBytes == 0:
		b.WriteString("It printed no output.\n")
	case len(shown) == 0:
		fmt.Fprintf(&b, "It printed %d bytes of output.\n", j.OutputBytes)
	case int64(len(shown)) == j.OutputBytes:
		b.WriteString("Its output:\n")
	default:
		fmt.Fprintf(&b, "The last %d of its %d bytes of output:\n", len(shown), j.OutputBytes)
	}
	if len(shown) > 0 {
		b.Write(shown)
		if shown[len(shown)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "Read its output with job_output (job_id %q).\n</system-reminder>", j.ID)
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return llm.Message{
		ID:      "job-notice-" + hex.EncodeToString(id[:]),
		Role:    llm.RoleUser,
		Content: []llm.Block{llm.TextBlock(b.String())},
		Source:  NoticeSource,
	}
}

// cleanTail makes the end of an output presentable: when it does not
// start at the beginning of the output, a partial first line (or at
// least a partial UTF-8 sequence) is dropped, and invalid UTF-8 is
// replaced.
func cleanTail(tail []byte, total int64) []byte {
	if int64(len(tail)) < total {
		if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
			tail = tail[i+1:]
		} else {
			for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
				tail = tail[1:]
			}
		}
	}
	return bytes.ToValidUTF8(tail, []byte("\uFFFD"))
}
