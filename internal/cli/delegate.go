package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/subagent/codex"
)

const delegateUsage = `usage:
  dsh delegate codex [--json] [--description D] [--model M] [--effort E]
                     [--output-schema JSON|@FILE] [--image PATH]... [--cwd DIR]
                     [--thread-mode ephemeral|persistent|session] [--thread-id ID]
                     [--permission-mode read-only|workspace-write|danger-full-access]
                     [--timeout-ms N] [--patch FILE]... PROMPT|-
  dsh delegate recover [--json] ID
`

// delegationsDir is where machine delegations keep their journals.
func delegationsDir(home string) string { return filepath.Join(home, "delegations") }

func delegateCmd(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Stderr, delegateUsage)
		return ExitUsage
	}
	switch args[0] {
	case "codex":
		return delegateCodex(ctx, args[1:], stdio)
	case "recover":
		return delegateRecover(args[1:], stdio)
	}
	fmt.Fprintf(stdio.Stderr, "dsh delegate: unknown target %q\n%s", args[0], delegateUsage)
	return ExitUsage
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// delegateCodex is the machine interface to a Codex delegation: typed
// checkpoints while it runs, a final receipt, and a private journal under
// $DSH_HOME/delegations/ID.
func delegateCodex(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("delegate codex", stdio)
	var (
		p           codex.Params
		asJSON      bool
		schemaArg   string
		images      stringList
		patches     patchFlags
		timeoutMs   = fs.Int64("timeout-ms", -1, "deadline for the whole delegation in ms (0 = none; default from the codex row)")
		description = fs.String("description", "", "short description (names durable threads)")
	)
	fs.BoolVar(&asJSON, "json", false, "print JSON lines: start, checkpoints, progress and the final receipt")
	fs.StringVar(&p.Model, "model", "", "Codex model id")
	fs.StringVar(&p.Effort, "effort", "", "reasoning effort: "+strings.Join(codex.Efforts, ", "))
	fs.StringVar(&schemaArg, "output-schema", "", "object-rooted JSON Schema for the answer (JSON text, or @FILE)")
	fs.Var(&images, "image", "absolute path of an image to show Codex (repeatable)")
	fs.StringVar(&p.Cwd, "cwd", "", "working directory (default: the current directory)")
	fs.StringVar(&p.ThreadMode, "thread-mode", "", "ephemeral, persistent or session")
	fs.StringVar(&p.ThreadID, "thread-id", "", "continue this durable thread")
	fs.StringVar(&p.PermissionMode, "permission-mode", "", "read-only, workspace-write or danger-full-access (may only narrow the configured mode)")
	fs.Var(&patches, "patch", "apply this profile patch file after config.yaml (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 1 {
		fmt.Fprint(stdio.Stderr, delegateUsage)
		return ExitUsage
	}
	prompt := pos[0]
	if prompt == "-" {
		b, err := io.ReadAll(stdio.Stdin)
		if err != nil {
			return fail(stdio, err)
		}
		prompt = string(b)
	}
	p.Prompt, p.Description, p.Images = prompt, *description, images
	if *timeoutMs >= 0 {
		d := time.Duration(*timeoutMs) * time.Millisecond
		p.Timeout = &d
	}
	if schemaArg != "" {
		raw := []byte(schemaArg)
		if name, ok := strings.CutPrefix(schemaArg, "@"); ok {
			if raw, err = os.ReadFile(name); err != nil {
				return fail(stdio, &app.ConfigError{Err: fmt.Errorf("--output-schema: %w", err)})
			}
		}
		p.OutputSchema = json.RawMessage(raw)
	}
	home, _, comp, err := app.Compose(app.Options{Patches: patches})
	if err != nil {
		return fail(stdio, err)
	}
	prov, err := app.NewCodexProvider(comp)
	if err != nil {
		return fail(stdio, &app.ConfigError{Err: err})
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(stdio, err)
	}
	// One invocation is one call: there is no session whose thread a
	// later call could reuse.
	if p.ThreadMode == codex.ThreadSession {
		return fail(stdio, &app.ConfigError{Err: errors.New("--thread-mode session needs a dsh session; use persistent and pass --thread-id to continue")})
	}

	// SIGINT and SIGTERM cancel the run, which then ends with a receipt
	// (status aborted); only SIGKILL leaves an abandoned journal.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	id := codex.NewJournalID()
	p.RunID = id
	j, err := codex.CreateJournal(delegationsDir(home), id)
	if err != nil {
		return fail(stdio, err)
	}
	var outMu sync.Mutex
	emit := func(l codex.JournalLine) {
		l.ID = id
		if l.At.IsZero() {
			l.At = time.Now().UTC()
		}
		if err := j.Append(l); err != nil {
			fmt.Fprintln(stdio.Stderr, "dsh: journal:", err)
		}
		outMu.Lock()
		defer outMu.Unlock()
		switch {
		case asJSON:
			b, _ := json.Marshal(l)
			fmt.Fprintf(stdio.Stdout, "%s\n", b)
		case l.Type == "progress":
			fmt.Fprintln(stdio.Stderr, l.Line)
		case l.Type == "checkpoint" && l.Checkpoint.Name == "thread":
			fmt.Fprintf(stdio.Stderr, "codex thread %v\n", l.Checkpoint.Data["threadId"])
		}
	}
	emit(codex.JournalLine{Type: "start", Start: map[string]any{
		"pid": os.Getpid(), "journal": j.Dir, "cwd": cwd, "argv": prov.Config().Command,
	}})
	out := prov.Delegate(ctx, p, codex.Caller{Cwd: cwd}, codex.Observer{
		Checkpoint: func(c codex.Checkpoint) { emit(codex.JournalLine{Type: "checkpoint", Checkpoint: &c}) },
		Progress:   func(line string) { emit(codex.JournalLine{Type: "progress", Line: line}) },
	})
	ferr := j.Finish(out)
	if asJSON {
		b, _ := json.Marshal(codex.JournalLine{Type: "receipt", ID: id, At: time.Now().UTC(), Receipt: &out})
		fmt.Fprintf(stdio.Stdout, "%s\n", b)
	} else {
		if out.Text != "" {
			fmt.Fprintln(stdio.Stdout, out.Text)
		}
		if out.Status == codex.StatusCompleted && out.Structured == nil && out.ThreadMode != codex.ThreadEphemeral && out.ThreadID != "" {
			fmt.Fprintln(stdio.Stdout, codex.Marker(out))
		}
		if out.Status != codex.StatusCompleted {
			fmt.Fprintf(stdio.Stderr, "dsh: codex delegation %s (%s): %s\n", out.Status, out.Category, out.Error)
		}
		fmt.Fprintf(stdio.Stderr, "receipt: dsh delegate recover %s\n", id)
	}
	if ferr != nil {
		fmt.Fprintln(stdio.Stderr, "dsh: journal:", ferr)
	}
	switch {
	case out.Category == codex.CategoryInvalid:
		return ExitUsage
	case out.Status == codex.StatusAborted:
		return ExitInterrupted
	case out.Status != codex.StatusCompleted:
		return ExitFailed
	}
	return ExitOK
}

// delegateRecover reports a delegation's terminal receipt (or how far its
// journal got) without writing anything.
func delegateRecover(args []string, stdio IO) int {
	fs := newFlags("delegate recover", stdio)
	asJSON := fs.Bool("json", false, "print the recovery as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		fmt.Fprint(stdio.Stderr, delegateUsage)
		return ExitUsage
	}
	// Recovery reads only the journal: a broken config.yaml must not hide
	// a receipt.
	home, err := config.Home()
	if err != nil {
		return fail(stdio, &app.ConfigError{Err: err})
	}
	// A delegation id may be abbreviated to a unique prefix.
	id, err := resolveDelegation(delegationsDir(home), pos[0])
	if err != nil {
		return fail(stdio, err)
	}
	rec, err := codex.Recover(delegationsDir(home), id)
	if err != nil {
		return fail(stdio, err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(rec, "", "  ")
		fmt.Fprintf(stdio.Stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdio.Stdout, "delegation %s: %s\n", rec.ID, rec.State)
		if r := rec.Receipt; r != nil {
			fmt.Fprintf(stdio.Stdout, "status: %s", r.Status)
			if r.Category != "" {
				fmt.Fprintf(stdio.Stdout, " (%s: %s)", r.Category, r.Error)
			}
			fmt.Fprintf(stdio.Stdout, "\nthread: %s\nusage: %s\ncleanup confirmed: %v\n", orDash(r.ThreadID), r.Usage.Completeness, r.Cleanup.Confirmed)
			if r.Text != "" {
				fmt.Fprintf(stdio.Stdout, "answer:\n%s\n", r.Text)
			}
		} else {
			if rec.LastCheckpoint != nil {
				fmt.Fprintf(stdio.Stdout, "last checkpoint: %s at %s\n", rec.LastCheckpoint.Name, rec.LastCheckpoint.At.Format(time.RFC3339))
			}
			fmt.Fprintf(stdio.Stdout, "caller pid %d alive: %v; codex process group %d alive: %v\n", rec.CallerPid, rec.CallerAlive, rec.Pgid, rec.GroupAlive)
		}
	}
	if rec.Receipt != nil && rec.Receipt.Status == codex.StatusCompleted {
		return ExitOK
	}
	return ExitFailed
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
