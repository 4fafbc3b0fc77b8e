package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/schedule"
	"github.com/dsh-dev/dsh/internal/store"
)

// scheduleCmd runs "dsh schedule": scheduled runs that dsh serve fires.
func scheduleCmd(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Stderr, usage())
		return ExitUsage
	}
	switch args[0] {
	case "add":
		return scheduleAdd(ctx, args[1:], stdio)
	case "list", "ls":
		return scheduleList(ctx, args[1:], stdio)
	case "rm", "remove":
		return scheduleRemove(ctx, args[1:], stdio)
	case "run":
		return scheduleRun(ctx, args[1:], stdio)
	}
	fmt.Fprintf(stdio.Stderr, "dsh schedule: unknown subcommand %q\n", args[0])
	return ExitUsage
}

func scheduleAdd(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("schedule add", stdio)
	cron := fs.String("cron", "", "five-field cron expression")
	tz := fs.String("tz", "", "time zone of --cron (default UTC)")
	every := fs.Duration("every", 0, "interval")
	at := fs.String("at", "", "one instant, RFC 3339")
	cwd := fs.String("cwd", "", "working directory of the runs")
	prompt := fs.String("prompt", "", "the prompt of each run")
	model := fs.String("model", "", "model as provider/model")
	perm := fs.String("permission", "", "permission preset of the runs")
	approval := fs.String("approval", "never", "never or auto")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(rest) > 0 {
		fmt.Fprintf(stdio.Stderr, "dsh schedule add: unexpected argument %q\n", rest[0])
		return ExitUsage
	}
	var spec schedule.Spec
	n := 0
	if *cron != "" {
		spec, n = schedule.Spec{Kind: schedule.KindCron, Cron: *cron, TZ: *tz}, n+1
	}
	if *every != 0 {
		spec, n = schedule.Spec{Kind: schedule.KindEvery, Every: schedule.Duration(*every)}, n+1
	}
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "dsh schedule add: --at %q: want RFC 3339 (2026-12-24T09:00:00+01:00)\n", *at)
			return ExitUsage
		}
		spec, n = schedule.Spec{Kind: schedule.KindAt, At: t}, n+1
	}
	if n != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh schedule add: give exactly one of --cron, --every and --at")
		return ExitUsage
	}
	if *tz != "" && spec.Kind != schedule.KindCron {
		fmt.Fprintln(stdio.Stderr, "dsh schedule add: --tz applies to --cron only")
		return ExitUsage
	}
	dir := *cwd
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return fail(stdio, err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fail(stdio, err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		fmt.Fprintf(stdio.Stderr, "dsh schedule add: --cwd %s is not a directory\n", dir)
		return ExitUsage
	}
	s := &schedule.Schedule{Spec: spec, Cwd: dir, Prompt: *prompt, Model: *model, Permission: *perm, Approval: *approval}
	if err := s.Validate(); err != nil {
		fmt.Fprintf(stdio.Stderr, "dsh schedule add: %v\n", err)
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	if err := schedule.Add(ctx, a.Store, s, time.Now()); err != nil {
		return fail(stdio, err)
	}
	next, ok, _ := s.NextAfter(time.Now())
	fmt.Fprintf(stdio.Stdout, "schedule %s added", s.ID)
	if ok {
		fmt.Fprintf(stdio.Stdout, "; next run %s", next.Format(time.RFC3339))
	}
	fmt.Fprintln(stdio.Stdout, ` ("dsh serve" fires it)`)
	return ExitOK
}

func scheduleList(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("schedule list", stdio)
	asJSON := fs.Bool("json", false, "print the schedules as a JSON array")
	if rest, err := parseInterspersed(fs, args); err != nil || len(rest) > 0 {
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	all, err := schedule.List(ctx, a.Store)
	if all == nil && err != nil {
		return fail(stdio, err)
	}
	// A row that cannot be read is named on stderr; the others are still
	// listed.
	listErr := err
	defer func() {
		if listErr != nil {
			fmt.Fprintf(stdio.Stderr, "dsh schedule list: %v\n", listErr)
		}
	}()
	code = ExitOK
	if listErr != nil {
		code = ExitFailed
	}
	if *asJSON {
		if all == nil {
			all = []schedule.Schedule{}
		}
		if c := writeJSON(stdio, all); c != ExitOK {
			return c
		}
		return code
	}
	if len(all) == 0 {
		fmt.Fprintln(stdio.Stdout, "no schedules")
		return code
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWHEN\tNEXT\tLAST\tCWD\tPROMPT")
	now := time.Now()
	for _, s := range all {
		when := ""
		switch s.Spec.Kind {
		case schedule.KindCron:
			when = "cron " + s.Spec.Cron
			if s.Spec.TZ != "" {
				when += " " + s.Spec.TZ
			}
		case schedule.KindEvery:
			when = "every " + time.Duration(s.Spec.Every).String()
		case schedule.KindAt:
			when = "at " + s.Spec.At.Format(time.RFC3339)
		}
		next, ok, _ := s.NextAfter(now)
		nextS, last := "-", "-"
		if ok {
			nextS = next.Format(time.RFC3339)
		}
		if s.LastFire > 0 {
			last = time.UnixMilli(s.LastFire).Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, cell(when), nextS, last, cell(s.Cwd), clipPrompt(s.Prompt, 40))
	}
	_ = tw.Flush()
	return code
}

// clipPrompt is a prompt's first line as a table cell, cut at n runes.
func clipPrompt(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	r := []rune(cell(s))
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return string(r)
}

// cell keeps text from a schedule (a prompt, a directory's name) from
// rewriting the terminal or the table: control characters (terminal
// escapes among them) and bidirectional overrides are shown as "?".
func cell(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return '?'
		}
		return r
	}, s)
}

func scheduleRemove(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("schedule rm", stdio)
	rest, err := parseInterspersed(fs, args)
	if err != nil || len(rest) != 1 {
		if err == nil {
			fmt.Fprintln(stdio.Stderr, "dsh schedule rm: want one schedule ID")
		}
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	s, err := schedule.Get(ctx, a.Store, rest[0])
	var bad *schedule.BadRecordError
	if err != nil && !(errors.As(err, &bad) && s.ID != "") {
		// A row that cannot be read is removed all the same, by its id.
		return failSchedule(stdio, err)
	}
	if err := a.Store.DeleteSchedule(ctx, s.ID); err != nil {
		return failSchedule(stdio, err)
	}
	fmt.Fprintf(stdio.Stdout, "schedule %s removed\n", s.ID)
	return ExitOK
}

// scheduleRun fires a schedule now, in this process, through a session
// host of its own: the session's origin names the schedule as a fired one
// does; the schedule's own cadence is unchanged.
func scheduleRun(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("schedule run", stdio)
	rest, err := parseInterspersed(fs, args)
	if err != nil || len(rest) != 1 {
		if err == nil {
			fmt.Fprintln(stdio.Stderr, "dsh schedule run: want one schedule ID")
		}
		return ExitUsage
	}
	a, code := openApp(ctx, stdio, nil)
	if a == nil {
		return code
	}
	defer a.Close()
	s, err := schedule.Get(ctx, a.Store, rest[0])
	if err != nil {
		return failSchedule(stdio, err)
	}
	h, err := host.New(host.Config{App: a, Holder: "dsh schedule run", IdleAfter: -1})
	if err != nil {
		return fail(stdio, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = h.Close(cctx)
	}()
	st := schedule.HostStarter{Host: h}
	id, err := st.Start(ctx, s, time.Now())
	if err != nil {
		return fail(stdio, err)
	}
	fmt.Fprintf(stdio.Stderr, "session %s\n", id)
	out, err := h.RunUntilIdle(ctx, id)
	if err != nil {
		return fail(stdio, err)
	}
	fmt.Fprintln(stdio.Stdout, out.Text)
	if out.Reason.Kind != "completed" {
		fmt.Fprintf(stdio.Stderr, "dsh schedule run: the run ended %s\n", out.Reason.Kind)
		return ExitFailed
	}
	return ExitOK
}

func failSchedule(stdio IO, err error) int {
	fmt.Fprintf(stdio.Stderr, "dsh: %v\n", err)
	if errors.Is(err, store.ErrScheduleNotFound) {
		fmt.Fprintln(stdio.Stderr, `dsh: "dsh schedule list" shows the schedules and their ids`)
		return ExitUsage
	}
	return ExitFailed
}
