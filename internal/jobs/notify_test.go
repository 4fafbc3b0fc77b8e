package jobs

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/llm"
)

// fakeOwner records deliveries.
type fakeOwner struct {
	busy    bool
	wakeErr error
	got     []string // "inject" or "wake", in order
	msgs    []llm.Message
}

func (o *fakeOwner) Busy() bool { return o.busy }
func (o *fakeOwner) Inject(m llm.Message) error {
	o.got, o.msgs = append(o.got, "inject"), append(o.msgs, m)
	return nil
}
func (o *fakeOwner) Wake(m llm.Message) error {
	if o.wakeErr != nil {
		return o.wakeErr
	}
	o.got, o.msgs = append(o.got, "wake"), append(o.msgs, m)
	return nil
}

// event is one step of a notifier scenario.
type event struct {
	owner string
	busy  bool
	human bool // a human starts a turn instead of a job ending
	job   func(*Job)
	want  Delivery
}

func TestNotifierRule(t *testing.T) {
	idle := func(want Delivery) event { return event{owner: "a", want: want} }
	busy := event{owner: "a", busy: true, want: Injected}
	human := event{owner: "a", human: true}
	tests := []struct {
		name     string
		maxWakes int
		events   []event
	}{
		{"busy owner gets it injected", 0, []event{busy, busy}},
		{"idle owner is woken three times, then injected", 0,
			[]event{idle(Woken), idle(Woken), idle(Woken), idle(Injected), idle(Injected)}},
		{"a human turn resets the count", 0,
			[]event{idle(Woken), idle(Woken), idle(Woken), idle(Injected), human, idle(Woken), idle(Woken), idle(Woken), idle(Injected)}},
		{"injections into busy turns do not count", 0,
			[]event{idle(Woken), busy, idle(Woken), busy, idle(Woken), idle(Injected)}},
		{"counts are per owner", 0,
			[]event{idle(Woken), idle(Woken), idle(Woken), {owner: "b", want: Woken}, idle(Injected)}},
		{"MaxWakes 1", 1, []event{idle(Woken), idle(Injected), human, idle(Woken)}},
		{"negative MaxWakes never wakes", -1, []event{idle(Injected), busy}},
		{"no notice for a running job", 0, []event{{owner: "a", job: func(j *Job) { j.Status = Running }, want: Skipped}, idle(Woken)}},
		{"no notice for a reported job", 0, []event{{owner: "a", job: func(j *Job) { j.Reported = true }, want: Skipped}, idle(Woken)}},
		{"no notice for a vanished owner", 0, []event{{owner: "gone", want: Skipped}, idle(Woken)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owners := map[string]*fakeOwner{"a": {}, "b": {}}
			n := &Notifier{MaxWakes: tt.maxWakes, Owner: func(id string) Owner {
				if o, ok := owners[id]; ok {
					return o
				}
				return nil
			}}
			for i, ev := range tt.events {
				if ev.human {
					n.NoteHumanTurn(ev.owner)
					continue
				}
				if o := owners[ev.owner]; o != nil {
					o.busy = ev.busy
				}
				j := Job{ID: "bash-1", Kind: "bash", Owner: ev.owner, Status: Completed}
				if ev.job != nil {
					ev.job(&j)
				}
				got, err := n.Deliver(j)
				if err != nil || got != ev.want {
					t.Fatalf("event %d: %s, %v; want %s", i, got, err, ev.want)
				}
			}
		})
	}
}

func TestNotifierWakeFailureGivesTheWakeBack(t *testing.T) {
	o := &fakeOwner{wakeErr: errors.New("closed")}
	n := &Notifier{MaxWakes: 1, Owner: func(string) Owner { return o }}
	j := Job{ID: "bash-1", Kind: "bash", Owner: "a", Status: Failed}
	if d, err := n.Deliver(j); d != Woken || err == nil {
		t.Fatalf("%s %v", d, err)
	}
	o.wakeErr = nil
	if d, err := n.Deliver(j); d != Woken || err != nil {
		t.Fatalf("after a failed wake: %s %v", d, err)
	}
}

func TestNoticeText(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	long := strings.Repeat("line of output\n", 400) + "the end\n"
	tests := []struct {
		name   string
		output string
		desc   string
		run    Outcome
		want   []string
		absent []string
	}{
		{"short output", "1\n2\n3\n", "Count", Exited(0), []string{
			"Background job bash-1 (bash: Count) finished [status: completed, exit code 0].",
			"Its output:\n1\n2\n3\n", `job_output (job_id "bash-1")`}, nil},
		{"long output is cut to whole lines", long, "", Exited(2), []string{
			"Background job bash-2 (bash) finished [status: failed, exit code 2].",
			"The last 1988 of its 6008 bytes of output:\nline of output\n", "the end\n"}, []string{":\ne of output"}},
		{"no output", "", "Quiet", Exited(0), []string{"It printed no output."}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := start(t, r, Spec{Kind: "bash", Owner: "a", Description: tt.desc, Run: func(_ context.Context, out io.Writer) (Outcome, error) {
				_, _ = io.WriteString(out, tt.output)
				return tt.run, nil
			}})
			j = r.snapshotOf(t, j.ID)
			o := &fakeOwner{}
			n := &Notifier{Jobs: r, Owner: func(string) Owner { return o }}
			if _, err := n.Deliver(j); err != nil || len(o.msgs) != 1 {
				t.Fatalf("deliver: %v, %d messages", err, len(o.msgs))
			}
			m := o.msgs[0]
			if m.Role != llm.RoleUser || m.Source.Kind != "plugin" || m.Source.Plugin != "jobs" || m.Source.Form != "notice" || m.ID == "" {
				t.Fatalf("message %+v", m)
			}
			text := m.Text()
			if len(text) > DefaultNoticeTail+400 {
				t.Fatalf("notice not bounded: %d bytes", len(text))
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("notice lacks %q:\n%s", w, text)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(text, a) {
					t.Errorf("notice has %q:\n%s", a, text)
				}
			}
		})
	}
}

// snapshotOf waits for a job to end, without marking it reported the way
// Wait does, so that its notice is still due.
func (r *Registry) snapshotOf(t *testing.T, id string) Job {
	t.Helper()
	r.mu.Lock()
	e := r.jobs[id]
	r.mu.Unlock()
	<-e.done
	j, _ := r.Get(id)
	return j
}
