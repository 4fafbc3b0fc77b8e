package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/app"
	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/host"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// RunResult is the final line of dsh run --json.
type RunResult struct {
	Type      string    `json:"type"`
	SessionID string    `json:"sessionId"`
	Status    string    `json:"status"`
	Text      string    `json:"text"`
	Usage     llm.Usage `json:"usage"`
	Error     string    `json:"error,omitempty"`
	// Goal is the goal of a --goal run as it ended.
	Goal *goal.Goal `json:"goal,omitempty"`
}

func runCmd(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("run", stdio)
	model := fs.String("model", "", "model as provider/model (default from config, else "+"deepseek/deepseek-v4-flash)")
	effort := fs.String("effort", "", "reasoning effort: off, low, high or max")
	cwd := fs.String("cwd", "", "working directory of a new session (default: current directory)")
	asJSON := fs.Bool("json", false, "print every session event as a JSON line, then a run/result line")
	resume := fs.String("resume", "", "resume the session with this id")
	cont := fs.Bool("continue", false, "resume the newest session of this directory")
	preset := fs.String("agent-preset", "", "agent preset of a new session (standard, minimal, or one from the profile)")
	perm := fs.String("permission", "", "permission preset: read-only, workspace-write (default), auto or full-access")
	approval := fs.String("approval", "", "approval policy: ask (default) or never")
	planMode := fs.Bool("plan", false, "start in plan mode: explore and present a plan before changing anything")
	noPlan := fs.Bool("no-plan", false, "leave plan mode (a resumed session that is in it)")
	quiet := fs.Bool("quiet", false, "no progress on stderr, even on a terminal")
	showProgress := fs.Bool("progress", false, "stream progress to stderr even when it is no terminal")
	mcpPromptSpec := fs.String("mcp-prompt", "", "render this MCP prompt (SERVER:PROMPT or SERVER:PROMPT:JSON) as the user message, before PROMPT")
	goalText := fs.String("goal", "", "pursue this objective as a goal: rounds run until the model completes it or the round cap")
	maxGoalRounds := fs.Int("max-goal-rounds", 0, "round cap of --goal (default 20)")
	var patches patchFlags
	fs.Var(&patches, "patch", "apply this profile patch file after config.yaml (repeatable)")
	pos, err := parseInterspersed(fs, args)
	failed := &runFailure{stdio: stdio, asJSON: *asJSON || wantsJSON(args)}
	if err != nil {
		failed.result(err.Error())
		return ExitUsage
	}
	if *goalText != "" {
		if len(pos) != 0 || *mcpPromptSpec != "" {
			return failed.usage("--goal takes the objective in place of PROMPT and --mcp-prompt")
		}
		if strings.TrimSpace(*goalText) == "" {
			return failed.usage("the goal is empty")
		}
	} else if *maxGoalRounds != 0 {
		return failed.usage("--max-goal-rounds needs --goal")
	}
	if *maxGoalRounds < 0 || *maxGoalRounds > goal.MaxMaxRounds {
		return failed.usage("--max-goal-rounds must be between 1 and %d", goal.MaxMaxRounds)
	}
	if *goalText == "" && len(pos) != 1 && (len(pos) != 0 || *mcpPromptSpec == "") {
		return failed.usage("exactly one PROMPT argument is required (use - to read stdin)")
	}
	if *resume != "" && *cont {
		return failed.usage("--resume and --continue are exclusive")
	}
	if *planMode && *noPlan {
		return failed.usage("--plan and --no-plan are exclusive")
	}
	var resumePlan *bool
	if *planMode || *noPlan {
		resumePlan = planMode
	}
	prompt := ""
	if len(pos) == 1 {
		prompt = pos[0]
	}
	if prompt == "-" {
		b, err := io.ReadAll(io.LimitReader(stdio.Stdin, 16<<20))
		if err != nil {
			return failed.fail(fmt.Errorf("read prompt: %w", err))
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" && *mcpPromptSpec == "" && *goalText == "" {
		return failed.usage("the prompt is empty")
	}

	// The runtime starts a thread for signal delivery at the first
	// signal.Notify (a third of a millisecond): it starts here, while the
	// store opens, through a signal whose default action is to be
	// ignored. Interrupts keep their default (dsh exits) until the run is
	// ready to handle them below.
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGWINCH)
		signal.Stop(c)
	}()
	defer func() { <-warmed }()

	a, err := app.Open(ctx, app.Options{Patches: patches})
	if err != nil {
		return failed.fail(err)
	}
	defer a.Close()
	// Approvals and questions (ask_user_question, exit_plan_mode) are
	// asked on the controlling terminal even when stdin is piped (the
	// prompt may come from it); without one nobody can answer, so asks are
	// denied and questions fail at once (QUESTION_UNAVAILABLE): the host
	// is headless, with no queue anyone could answer.
	var (
		human permission.Answerer
		asker question.Asker
	)
	if t, closeTTY, err := permission.OpenTerminal(); err == nil {
		defer closeTTY()
		human, asker = t, question.Terminal{Term: t}
	}
	// dsh run is a thin driver over the session host: it holds the
	// session (and its lease) until the run is over, and Close flushes
	// the log and releases the lease.
	h, err := host.New(host.Config{App: a, Holder: "dsh run", IdleAfter: -1, Human: human, Asker: asker, Headless: human == nil})
	if err != nil {
		return failed.fail(err)
	}
	defer h.Close(context.WithoutCancel(ctx))
	var info host.Info
	if *resume != "" || *cont {
		info, err = h.Resume(ctx, host.ResumeRequest{ID: *resume, Continue: *cont, Cwd: *cwd, Model: *model, Effort: *effort,
			Permission: *perm, Approval: *approval, AgentPreset: *preset, PlanMode: resumePlan})
	} else {
		info, err = h.Create(ctx, host.CreateRequest{Cwd: *cwd, Model: *model, Effort: *effort,
			Permission: *perm, Approval: *approval, AgentPreset: *preset, PlanMode: *planMode})
	}
	if err != nil {
		return failed.fail(resumeError(*resume, err))
	}
	id := info.Header.ID
	failed.sessionID = id
	log, _ := h.Log(id)
	if *goalText != "" {
		// Nothing to render; the objective is the goal's.
	} else if prompt, err = mcpPrompt(ctx, func(name string) (*mcp.Server, bool) { return h.MCPServer(id, name) }, *mcpPromptSpec, prompt); err != nil {
		return failed.fail(err)
	}
	// The event stream (--json) and the subagent activity lines follow
	// the log from their own goroutine, so a consumer that reads stdout
	// slowly, or not at all, never stalls the agent; everything it has
	// not read yet stays in the log, so the stream is complete and in
	// order once it catches up.
	var out *bufio.Writer
	if *asJSON {
		out = bufio.NewWriterSize(stdio.Stdout, 64<<10)
	}
	// --quiet also silences the subagent lines a run shows without a
	// progress stream.
	streamIO := stdio
	if *quiet {
		streamIO.Stderr = io.Discard
	}
	finishStream := streamEvents(log, out, streamIO, newProgress(stdio, *showProgress, *quiet, *asJSON))
	defer finishStream()

	// First interrupt cancels the turn cleanly; a second exits at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupted := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-runCtx.Done():
			return
		}
		close(interrupted)
		_ = h.Cancel(runCtx, id, false)
		select {
		case <-sigs:
			fmt.Fprintln(stdio.Stderr, "dsh: interrupted")
			os.Exit(ExitInterrupted)
		case <-runCtx.Done():
		}
	}()

	if *goalText != "" {
		// A person asked for the goal: it is created armed and its first
		// round starts at once; the driver runs the rest.
		if _, err := h.SetGoal(ctx, id, host.GoalRequest{Action: host.GoalCreate, Objective: *goalText, MaxRounds: *maxGoalRounds}); err != nil {
			finishStream()
			return failed.fail(err)
		}
	} else if err := h.Send(ctx, id, agent.NewUserMessage(prompt), host.DeliveryQueue); err != nil {
		finishStream() // the result line comes after every event
		return failed.fail(err)
	}
	// The run ends only when the agent is idle with nothing pending, every
	// continuable child it started has settled (their settle notices wake
	// it), and no background job it owns is still running (their notices
	// start new turns, a bounded number in a row).
	res, runErr := h.RunUntilIdle(runCtx, id)
	cancel()
	// A session-title call still in flight is logged before the stream
	// ends, so that --json carries it.
	h.SettleTitle(ctx, id)

	status, exit := "completed", ExitOK
	switch res.Reason.Kind {
	case session.EndCompleted:
	case session.EndAborted:
		status, exit = "aborted", ExitInterrupted
	case session.EndMaxTokens:
		status, exit = "max-tokens", ExitFailed
	default:
		status, exit = "error", ExitFailed
	}
	select {
	case <-interrupted:
		exit = ExitInterrupted
		if status == "completed" {
			status = "aborted"
		}
	default:
	}
	errText := ""
	if runErr != nil {
		status, exit, errText = "error", ExitFailed, runErr.Error()
	} else if res.Reason.Failure != nil {
		errText = res.Reason.Failure.Error()
	}
	var goalState *goal.Goal
	if *goalText != "" {
		goalState, status, exit = goalOutcome(ctx, h, id, status, exit, stdio)
	}
	// run/result comes after every event of the run.
	finishStream()
	if *asJSON {
		_ = json.NewEncoder(out).Encode(RunResult{Type: "run/result", SessionID: id, Status: status, Text: res.Text, Usage: res.Usage, Error: errText, Goal: goalState})
		_ = out.Flush()
	} else if res.Text != "" {
		fmt.Fprintln(stdio.Stdout, res.Text)
	}
	if errText != "" {
		fmt.Fprintf(stdio.Stderr, "dsh: turn ended with %s: %s\n", status, errText)
	} else if status == "aborted" {
		fmt.Fprintln(stdio.Stderr, "dsh: turn aborted")
	}
	fmt.Fprintf(stdio.Stderr, "session %s\n", id)
	return exit
}

// streamEvents starts the goroutine that follows log from its first live
// event: each event goes to out as a JSON line (when out is set) and
// through the progress renderer p (childActivity when p is nil). The
// returned finish stops it after it has written every event appended so
// far and waits for it; it is idempotent.
func streamEvents(log *session.Log, out *bufio.Writer, stdio IO, p *progressOut) (finish func()) {
	f := log.Follow(log.FirstLiveSeq())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var enc *json.Encoder
		if out != nil {
			enc = json.NewEncoder(out)
		}
		labels := map[string]string{} // runId → label
		for {
			// Once stopped, Next still returns what is left and fails
			// only when the stream has caught up with the log.
			batch, err := p.next(ctx, f)
			if err != nil {
				p.close()
				return
			}
			for _, e := range batch {
				if enc != nil {
					_ = enc.Encode(e)
				}
				if p == nil {
					childActivity(stdio, e, labels)
				}
			}
			p.events(batch)
			if out != nil {
				_ = out.Flush()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			<-done
			f.Close()
		})
	}
}

// childActivity prints one stderr line per subagent start and end, so a
// headless run shows what its children are doing.
func childActivity(stdio IO, e session.Event, labels map[string]string) {
	switch e.Type {
	case session.TypeSubagentStart:
		var p subagent.StartEvent
		if e.Decode(&p) == nil {
			labels[p.RunID] = p.Label
			fmt.Fprintf(stdio.Stderr, "dsh: subagent %q started (%s, session %s)\n", p.Label, p.Mode, p.ChildID)
		}
	case session.TypeSubagentEnd:
		var p subagent.EndEvent
		if e.Decode(&p) == nil {
			fmt.Fprintf(stdio.Stderr, "dsh: subagent %q %s (session %s)\n", labels[p.RunID], p.StopReason, p.ChildID)
			delete(labels, p.RunID)
		}
	}
}

// goalOutcome is the status and exit code of a --goal run: 0 when the
// model completed the goal, 1 when it stopped blocked (by the model, or at
// its round cap) and 130 when a person's cancel paused it; a run that
// failed or was interrupted keeps its own. A line on stderr says how the
// goal ended.
func goalOutcome(ctx context.Context, h *host.Host, id, status string, exit int, stdio IO) (*goal.Goal, string, int) {
	st, err := h.Goal(ctx, id)
	if err != nil || st.Goal == nil {
		return nil, status, exit
	}
	g := st.Goal
	switch g.Phase {
	case goal.PhaseComplete:
		fmt.Fprintf(stdio.Stderr, "dsh: goal complete after %d of %d rounds\n", g.Rounds, g.MaxRounds)
		if exit == ExitOK {
			status = "goal-complete"
		}
	case goal.PhaseBlocked:
		fmt.Fprintf(stdio.Stderr, "dsh: goal blocked after %d of %d rounds: %s\n", g.Rounds, g.MaxRounds, g.BlockedReason)
		if exit == ExitOK {
			status, exit = "goal-blocked", ExitFailed
		}
	default:
		fmt.Fprintf(stdio.Stderr, "dsh: goal %s after %d of %d rounds\n", g.Phase, g.Rounds, g.MaxRounds)
		if exit == ExitOK {
			status, exit = "goal-"+g.Phase, ExitFailed
		}
	}
	return g, status, exit
}
