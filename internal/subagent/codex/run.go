package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
	"github.com/dsh-dev/dsh/internal/proc"
)

// InterruptGrace bounds how long a cancelled turn waits for turn/completed
// after turn/interrupt before the group is torn down regardless.
const InterruptGrace = 2 * time.Second

// ExitGrace is how long the app-server gets to exit by itself after its
// stdin closes (it takes about 0.5 s) before TERM.
const ExitGrace = 2 * time.Second

// stderrTail bounds the stderr kept in the outcome.
const stderrTail = 2048

// Delegate runs one delegation to the end and returns its outcome. It
// never returns early: when ctx ends the turn is interrupted, the group torn
// down, and the outcome says aborted. Checkpoints and progress go to obs.
func (p *Provider) Delegate(ctx context.Context, params Params, caller Caller, obs Observer) Outcome {
	r := &run{p: p, obs: obs, completed: make(chan struct{}, 1), items: map[string]*item{}}
	r.out.RunID = params.RunID
	if r.out.RunID == "" {
		r.out.RunID = p.newRunID()
	}
	r.out.StartedAt = time.Now().UTC()
	r.out.Process.Argv = append(append([]string(nil), p.cfg.Command...), "app-server")
	r.exec(ctx, params, caller)
	r.seal()
	return r.out
}

func (r *run) exec(ctx context.Context, params Params, caller Caller) {
	p := r.p
	defaultCwd := caller.Cwd
	if p.cfg.Dir != "" {
		defaultCwd = p.cfg.Dir
	}
	rs, err := resolve(params, &p.cfg, p.maxMode(caller), defaultCwd)
	r.req = rs
	r.out.ThreadMode = rs.thread
	r.out.Requested = Requested{
		Model: rs.Model, Cwd: rs.Cwd, PermissionMode: rs.mode, ApprovalPolicy: "never", Sandbox: rs.mode,
		Effort: rs.Effort, OutputSchema: rs.schema != nil, Images: len(rs.Images), ThreadID: rs.ThreadID,
		TimeoutMs: rs.deadline.Milliseconds(),
	}
	r.out.Effort.Requested = rs.Effort
	if err != nil {
		r.fail(CategoryInvalid, err.Error())
		return
	}
	dctx := ctx
	if rs.deadline > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithDeadline(ctx, r.out.StartedAt.Add(rs.deadline))
		defer cancel()
	}
	r.parent, r.dctx = ctx, dctx
	r.drive()
}

type item struct {
	typ, phase string
	text       strings.Builder
	paths      []string
}

type run struct {
	p           *Provider
	obs         Observer
	req         resolved
	out         Outcome
	parent      context.Context
	dctx        context.Context
	proc        *proc.Process
	handle      *proc.Handle
	conn        *jsonrpc.Conn
	claimed     string // thread id this run marked busy
	interrupted bool

	mu          sync.Mutex
	sealed      bool // no observer calls once set
	turnStarted bool // the turn-started checkpoint was emitted
	threadID    string
	turnID      string
	usage       *usageTracker
	items       map[string]*item
	messages    []*item // completed agent messages in order
	completed   chan struct{}
	turnDone    map[string]json.RawMessage // turn id → turn/completed params
	lastError   string
	rateLimits  map[string]json.RawMessage
	notes       []string
}

// seal ends observer and protocol callbacks and stamps the end.
func (r *run) seal() {
	r.mu.Lock()
	r.sealed = true
	r.out.Notes = append(r.out.Notes, r.notes...)
	r.notes = nil
	r.mu.Unlock()
	r.out.EndedAt = time.Now().UTC()
	r.out.DurationMs = r.out.EndedAt.Sub(r.out.StartedAt).Milliseconds()
	r.out.Notes = dedupe(r.out.Notes)
}

func (r *run) checkpoint(name string, data map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkpointLocked(name, data)
}

// checkpointLocked must be called with r.mu held.
func (r *run) checkpointLocked(name string, data map[string]any) {
	if name == "turn-started" {
		// Emitted by whichever comes first, the turn/start answer or the
		// turn/started notification, so it precedes the turn's progress.
		if r.turnStarted {
			return
		}
		r.turnStarted = true
	}
	if r.sealed || r.obs.Checkpoint == nil {
		return
	}
	r.obs.Checkpoint(Checkpoint{Name: name, At: time.Now().UTC(), Data: data})
}

// progress must be called with r.mu held.
func (r *run) progress(line string) {
	if r.sealed || r.obs.Progress == nil {
		return
	}
	r.obs.Progress(clip(line, 400))
}

func (r *run) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(format, args...)
}

// noteLocked must be called with r.mu held.
func (r *run) noteLocked(format string, args ...any) {
	if len(r.notes) < 32 {
		r.notes = append(r.notes, fmt.Sprintf(format, args...))
	}
}

func (r *run) fail(category, msg string) {
	if r.out.Status == StatusFailed || r.out.Status == StatusAborted {
		return
	}
	r.out.Status, r.out.Category, r.out.Error = StatusFailed, category, clip(msg, 4096)
	if category == CategoryCancelled {
		r.out.Status = StatusAborted
	}
}

// cause classifies an error of a blocking step: the caller's cancel and
// the deadline win over whatever the step reported.
func (r *run) cause(step string, err error) (string, string) {
	switch {
	case r.parent.Err() != nil:
		return CategoryCancelled, step + ": cancelled by the caller"
	case r.dctx.Err() != nil:
		return CategoryDeadline, fmt.Sprintf("%s: the delegation exceeded its %d ms deadline and was cancelled", step, r.req.deadline.Milliseconds())
	}
	if r.proc != nil {
		// A closed pipe usually means the process is exiting: give the
		// exit a moment to be observed before calling it a protocol error.
		select {
		case <-r.conn.Done():
			select {
			case <-r.proc.Exited():
			case <-time.After(ExitGrace):
			}
		default:
		}
		select {
		case <-r.proc.Exited():
			return CategoryProcessExit, fmt.Sprintf("%s: codex app-server exited unexpectedly%s: %v", step, r.exitText(), err)
		default:
		}
	}
	return CategoryProtocol, fmt.Sprintf("%s: %v", step, err)
}

func (r *run) exitText() string {
	info, err := r.proc.Wait()
	if err != nil {
		return ""
	}
	if info.Signaled {
		return fmt.Sprintf(" (killed by %v)", info.Signal)
	}
	return fmt.Sprintf(" (exit status %d)", info.Code)
}

// drive is the run after validation; every path ends in teardown.
func (r *run) drive() {
	defer r.teardown()
	child, err := proc.Start(context.WithoutCancel(r.dctx), proc.Spec{
		Argv: r.out.Process.Argv, Dir: r.req.Cwd, Env: r.p.env, KillGrace: r.p.cfg.KillGrace,
	})
	if err != nil {
		r.fail(CategorySpawn, fmt.Sprintf("start %s: %v", r.out.Process.Argv[0], err))
		return
	}
	r.proc = child
	r.handle = proc.NewHandle(child, nil)
	r.out.Process.Pid, r.out.Process.Pgid = child.Pid(), child.Pgid()
	r.conn = jsonrpc.NewConn(child.Stdout(), child.Stdin(), jsonrpc.Options{
		Dialect: jsonrpc.Codex, OnNotification: r.onNotification, OnRequest: r.onRequest,
		OnProtocolError: func(e error) { r.note("protocol: %v", e) },
	})
	r.checkpoint("spawned", map[string]any{"pid": child.Pid(), "pgid": child.Pgid()})

	if err := r.conn.Call(r.dctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": r.p.cfg.ClientName, "title": "dsh", "version": r.p.cfg.Version},
		"capabilities": nil,
	}, nil); err != nil {
		r.fail(r.cause("initialize", err))
		return
	}
	if err := r.conn.Notify("initialized", nil); err != nil {
		r.fail(r.cause("initialized", err))
		return
	}
	r.checkpoint("initialized", nil)

	if !r.openThread() {
		return
	}
	r.turn()
}

// threadResponse is the shared shape of thread/start and thread/resume
// results.
type threadResponse struct {
	Thread struct {
		ID    string `json:"id"`
		Turns []struct {
			ID string `json:"id"`
		} `json:"turns"`
	} `json:"thread"`
	Model             *string         `json:"model"`
	ModelProvider     string          `json:"modelProvider"`
	Cwd               *string         `json:"cwd"`
	ApprovalPolicy    json.RawMessage `json:"approvalPolicy"`
	ApprovalsReviewer string          `json:"approvalsReviewer"`
	Sandbox           json.RawMessage `json:"sandbox"`
	ReasoningEffort   *string         `json:"reasoningEffort"`
}

func (r *run) threadParams() map[string]any {
	m := map[string]any{"cwd": r.req.Cwd, "approvalPolicy": "never", "sandbox": r.req.mode}
	if r.req.Model != "" {
		m["model"] = r.req.Model
	}
	return m
}

// openThread starts or resumes the run's thread per the thread mode.
func (r *run) openThread() bool {
	switch {
	case r.req.ThreadID != "":
		if !r.p.claim(r.req.ThreadID) {
			r.fail(CategoryResumeRefused, fmt.Sprintf("thread %s is in use by another delegation", r.req.ThreadID))
			return false
		}
		r.claimed = r.req.ThreadID
		ok, category, msg := r.resume(r.req.ThreadID)
		if !ok {
			r.fail(category, msg)
		}
		return ok
	case r.req.thread == ThreadSession:
		if id := r.p.remembered(r.req.SessionKey); id != "" {
			if !r.p.claim(id) {
				r.note("the session's remembered thread %s is busy with another delegation; this call uses a fresh thread", id)
			} else {
				r.claimed = id
				ok, category, msg := r.resume(id)
				if ok {
					return true
				}
				r.p.release(id)
				r.claimed = ""
				if category == CategoryCancelled || category == CategoryDeadline || category == CategoryProcessExit {
					r.fail(category, msg)
					return false
				}
				r.note("the session's remembered thread %s could not be reused (%s); this call uses a fresh thread", id, msg)
			}
		}
	}
	return r.start()
}

func (r *run) start() bool {
	params := r.threadParams()
	params["ephemeral"] = r.req.thread == ThreadEphemeral
	var resp threadResponse
	if err := r.conn.Call(r.dctx, "thread/start", params, &resp); err != nil {
		r.fail(r.cause("thread/start", err))
		return false
	}
	if resp.Thread.ID == "" {
		r.fail(CategoryProtocol, "thread/start: the response has no thread id")
		return false
	}
	r.setThread(resp.Thread.ID, newUsageTracker(true, nil))
	r.out.Resumed = false
	if r.claimed == "" && r.p.claim(resp.Thread.ID) {
		r.claimed = resp.Thread.ID
	}
	if msg := r.verify(resp); msg != "" {
		r.fail(CategoryConfigMismatch, "thread/start: "+msg)
		return false
	}
	if r.req.thread != ThreadEphemeral {
		if err := r.conn.Call(r.dctx, "thread/name/set", map[string]any{
			"threadId": resp.Thread.ID, "name": clip("DSH · "+r.req.Description, 120),
		}, nil); err != nil {
			category, msg := r.cause("thread/name/set", err)
			if category != CategoryProtocol {
				r.fail(category, msg)
				return false
			}
			r.note("%s", msg)
		}
	}
	r.checkpoint("thread", map[string]any{"threadId": resp.Thread.ID, "resumed": false, "mode": r.req.thread})
	return true
}

// resume continues thread id with this run's overrides and checks the
// effective configuration. ok=false carries a category and message.
func (r *run) resume(id string) (ok bool, category, msg string) {
	params := r.threadParams()
	params["threadId"] = id
	// Install the tracker before the call: the replay of the thread's last
	// snapshot can arrive before the response.
	r.setThread(id, nil)
	var resp threadResponse
	if err := r.conn.Call(r.dctx, "thread/resume", params, &resp); err != nil {
		category, msg := r.cause("thread/resume "+id, err)
		if category == CategoryProtocol {
			category = CategoryResumeRefused
		}
		return false, category, msg
	}
	if resp.Thread.ID != "" && resp.Thread.ID != id {
		return false, CategoryConfigMismatch, fmt.Sprintf("thread/resume %s answered thread %s", id, resp.Thread.ID)
	}
	prior := make([]string, 0, len(resp.Thread.Turns))
	for _, t := range resp.Thread.Turns {
		prior = append(prior, t.ID)
	}
	r.mu.Lock()
	held := r.usage
	r.usage = newUsageTracker(false, prior)
	if held != nil {
		for _, h := range held.held {
			raw, _ := json.Marshal(map[string]any{"turnId": h.turn, "tokenUsage": h.snap})
			r.usage.observe(raw)
		}
	}
	r.mu.Unlock()
	r.out.Resumed = true
	if msg := r.verify(resp); msg != "" {
		return false, CategoryConfigMismatch, "thread/resume: " + msg
	}
	r.checkpoint("thread", map[string]any{"threadId": id, "resumed": true, "mode": r.req.thread})
	return true, "", ""
}

func (r *run) setThread(id string, u *usageTracker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.threadID = id
	if u == nil {
		u = newUsageTracker(false, nil)
	}
	r.usage = u
	r.out.ThreadID = id
}

// verify compares the effective configuration with the request; "" when
// it matches. Required fields must be present and well typed.
func (r *run) verify(resp threadResponse) string {
	eff := &Effective{ModelProvider: resp.ModelProvider, ApprovalsReviewer: resp.ApprovalsReviewer, Sandbox: resp.Sandbox, ReasoningEffort: resp.ReasoningEffort}
	if resp.Model != nil {
		eff.Model = *resp.Model
	}
	if resp.Cwd != nil {
		eff.Cwd = *resp.Cwd
	}
	var approval string
	_ = json.Unmarshal(resp.ApprovalPolicy, &approval)
	eff.ApprovalPolicy = approval
	r.out.Effective = eff
	r.out.Effort.ThreadDefault = resp.ReasoningEffort
	var problems []string
	if resp.Cwd == nil || !samePath(*resp.Cwd, r.req.Cwd) {
		problems = append(problems, fmt.Sprintf("cwd is %q, requested %q", eff.Cwd, r.req.Cwd))
	}
	if r.req.Model != "" && (resp.Model == nil || *resp.Model != r.req.Model) {
		problems = append(problems, fmt.Sprintf("model is %q, requested %q", eff.Model, r.req.Model))
	}
	if approval != "never" {
		problems = append(problems, fmt.Sprintf("approvalPolicy is %s, requested \"never\"", orMissing(resp.ApprovalPolicy)))
	}
	var sb struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(resp.Sandbox, &sb) != nil || sb.Type != sandboxPolicyType[r.req.mode] {
		problems = append(problems, fmt.Sprintf("sandbox is %s, requested %s", orMissing(resp.Sandbox), r.req.mode))
	}
	if len(problems) == 0 {
		return ""
	}
	return "effective configuration differs: " + strings.Join(problems, "; ")
}

func orMissing(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "missing"
	}
	return string(raw)
}

func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ea, err1 := filepath.EvalSymlinks(a)
	eb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ea == eb
}

// turn sends the prompt and follows the turn to its end.
func (r *run) turn() {
	input := []map[string]any{{"type": "text", "text": r.req.Prompt, "text_elements": []any{}}}
	for _, img := range r.req.Images {
		input = append(input, map[string]any{"type": "localImage", "path": img})
	}
	params := map[string]any{"threadId": r.threadID, "input": input}
	if r.req.Effort != "" {
		params["effort"] = r.req.Effort
		r.out.Effort.SentOnTurn = true
	}
	if r.req.schema != nil {
		params["outputSchema"] = json.RawMessage(r.req.OutputSchema)
	}
	var resp struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if err := r.conn.Call(r.dctx, "turn/start", params, &resp); err != nil {
		r.fail(r.cause("turn/start", err))
		return
	}
	if resp.Turn.ID == "" {
		r.fail(CategoryProtocol, "turn/start: the response has no turn id")
		return
	}
	r.mu.Lock()
	r.turnID = resp.Turn.ID
	r.out.TurnID = resp.Turn.ID
	r.usage.setTurn(resp.Turn.ID)
	r.mu.Unlock()
	r.checkpoint("turn-started", map[string]any{"turnId": resp.Turn.ID})

	var grace <-chan time.Time
	stop := r.dctx.Done()
	for {
		if turn, ok := r.turnCompletion(); ok {
			r.finishTurn(turn)
			return
		}
		select {
		case <-r.completed:
		case <-r.conn.Done():
			// Give notifications already read a chance to land.
			if turn, ok := r.turnCompletion(); ok {
				r.finishTurn(turn)
				return
			}
			r.fail(r.cause("turn", r.conn.Err()))
			return
		case <-stop:
			stop = nil
			r.interrupted = true
			go func() {
				ictx, cancel := context.WithTimeout(context.Background(), InterruptGrace)
				defer cancel()
				_ = r.conn.Call(ictx, "turn/interrupt", map[string]any{"threadId": r.threadID, "turnId": resp.Turn.ID}, nil)
			}()
			grace = time.After(InterruptGrace)
		case <-grace:
			r.fail(r.cause("turn", errors.New("turn/interrupt was not answered")))
			r.note("the app-server did not complete the turn within %v of turn/interrupt", InterruptGrace)
			return
		}
	}
}

func (r *run) turnCompletion() (json.RawMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.turnDone[r.turnID]
	return t, ok && r.turnID != ""
}
