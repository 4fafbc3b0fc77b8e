package subagent

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Model-facing tool names.
const (
	ToolSubagent     = "subagent"
	ToolSubagentFork = "subagent_fork"
	ToolListModels   = "list_subagent_models"
)

// CodeSubagentFailed is the tool error code of a delegation whose child
// did not complete; Reason carries the stop reason.
const CodeSubagentFailed = "SUBAGENT_FAILED"

var (
	//go:embed subagent.md
	spawnDescription string
	//go:embed subagent_fork.md
	forkDescription string
	//go:embed list_subagent_models.md
	listModelsDescription string
)

// modelSelectionBlock is the optional part of subagent.md.
var modelSelectionBlock = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?s)<!-- model-selection -->\n(.*?)<!-- /model-selection -->\n?`)
})

// ToolOptions configure one delegation tool bound to one provider.
type ToolOptions struct {
	// Service starts the runs. Required.
	Service *Service
	// Provider is the registered provider the tool delegates to. Required.
	Provider string
	// Name is the model-facing name; default ToolSubagentFork for a
	// provider that inherits the parent's context, else ToolSubagent.
	Name string
	// ResolveLog maps a call to the caller's live session log (the
	// composition root looks up c.SessionID). Required.
	ResolveLog func(c *tool.Call) (*session.Log, error)
	// ModelSelection offers provider, model and reasoning_effort. It is
	// refused for a provider that inherits context: a forked child keeps
	// its parent's route so the seeded history stays valid (and cached).
	ModelSelection bool
	// MaxDepth, Tools, Persona and OutputSchema are applied to every
	// child; each needs the matching provider capability.
	MaxDepth *int
	// Tools restricts every child's tools.
	Tools ToolFilter
	// Persona replaces every child's persona.
	Persona string
	// OutputSchema makes every child report through structured_output;
	// the tool result then carries the JSON after the text.
	OutputSchema json.RawMessage
	// Jobs, when set, offers run_in_background: the child runs as a
	// background job of kind "subagent" owned by the calling session, and
	// its answer arrives as the job's completion notice.
	Jobs *jobs.Registry
	// Timeout is the tool pipeline's limit on one call (its
	// Definition.Timeout); 0 means ForegroundTimeout. A foreground call
	// waits for the whole child run, far longer than the pipeline's
	// default; the child is aborted when the limit passes.
	Timeout time.Duration
}

// ForegroundTimeout is the default limit on one foreground delegation
// call: long enough for a substantial child run, short enough that a
// wedged child cannot hold the turn for ever.
const ForegroundTimeout = 2 * time.Hour

// NewTool returns a foreground delegation tool: each call starts a
// one-shot child, waits for it and returns its answer (and structured
// result, if any) with usage in Meta. Calls are concurrency-safe, so
// sibling delegations in one step run at the same time. Misconfiguration
// (an unknown provider, a capability it lacks) is an error here rather
// than on every call.
func NewTool(o ToolOptions) (tool.Definition, error) {
	if o.Service == nil || o.ResolveLog == nil {
		return tool.Definition{}, errors.New("subagent tool: Service and ResolveLog are required")
	}
	p, ok := o.Service.Provider(o.Provider)
	if !ok {
		return tool.Definition{}, fmt.Errorf("subagent tool: provider %q is not registered", o.Provider)
	}
	caps := p.Capabilities()
	for _, need := range []struct {
		asked, have bool
		what        string
	}{
		{o.MaxDepth != nil, caps.MaxDepth, "maxDepth"},
		{!o.Tools.IsZero(), caps.ToolFilter, "a tool filter"},
		{o.Persona != "", caps.Persona, "a persona"},
		{len(o.OutputSchema) > 0, caps.OutputSchema, "an output schema"},
	} {
		if need.asked && !need.have {
			return tool.Definition{}, fmt.Errorf("subagent tool: provider %q cannot honour %s", o.Provider, need.what)
		}
	}
	if o.MaxDepth != nil && *o.MaxDepth < 0 {
		return tool.Definition{}, fmt.Errorf("subagent tool: maxDepth %d is negative", *o.MaxDepth)
	}
	if len(o.OutputSchema) > 0 {
		if err := checkOutputSchema(o.OutputSchema); err != nil {
			return tool.Definition{}, fmt.Errorf("subagent tool: outputSchema: %w", err)
		}
	}
	if o.ModelSelection && caps.InheritsContext {
		return tool.Definition{}, fmt.Errorf("subagent tool: provider %q inherits the parent's context, so it keeps the parent's model; model selection is not offered", o.Provider)
	}
	desc, promptDesc := spawnDescription, "The complete, self-contained task for the subagent. It does not see this conversation, so include everything it needs."
	defaultName := ToolSubagent
	if caps.InheritsContext {
		desc, promptDesc = forkDescription, "The task for the forked subagent. It already sees this conversation's completed turns, so state only what is new."
		defaultName = ToolSubagentFork
	}
	if o.Name == "" {
		o.Name = defaultName
	}
	desc = modelSelectionBlock().ReplaceAllStringFunc(desc, func(m string) string {
		if !o.ModelSelection {
			return ""
		}
		return modelSelectionBlock().FindStringSubmatch(m)[1]
	})
	t := &delegateTool{o: o}
	if o.Timeout <= 0 {
		o.Timeout = ForegroundTimeout
	}
	return tool.Definition{
		Name:            o.Name,
		Description:     strings.TrimSpace(desc),
		Parameters:      delegateParameters(promptDesc, o.ModelSelection, o.Jobs != nil),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Timeout:         o.Timeout,
		Execute:         t.execute,
	}, nil
}

// delegateParameters is written out rather than marshalled from a map so
// that the properties read in a natural order (task first); the bytes
// are the same on every call, which keeps requests prompt-cacheable.
func delegateParameters(promptDesc string, modelSelection, background bool) json.RawMessage {
	prop := func(name, desc, extra string) string {
		d, _ := json.Marshal(desc)
		return fmt.Sprintf(`%q:{"type":"string",%s"description":%s}`, name, extra, d)
	}
	props := []string{
		prop("description", "A short (3-5 word) description of the delegated task, for display.", ""),
		prop("prompt", promptDesc, ""),
	}
	if background {
		props = append(props, `"run_in_background":{"type":"boolean","description":"Run the subagent in the background and return at once with a job id; its answer arrives as a notice when it finishes (job_output reads it earlier)."}`)
	}
	if modelSelection {
		props = append(props,
			prop("provider", "LLM provider id for the subagent (see list_subagent_models). Omit to use your own.", ""),
			prop("model", "Model id for the subagent. Omit to use your own model (or the provider's default when provider is set).", ""),
			prop("reasoning_effort", "Reasoning effort for the subagent's model. Omit for the default.", `"enum":["off","low","high","max"],`),
		)
	}
	return json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") +
		`},"required":["description","prompt"],"additionalProperties":false}`)
}

type delegateTool struct{ o ToolOptions }

type delegateArgs struct {
	Description, Prompt     string
	Provider, Model, Effort string
	Background              bool
}

// parseArgs reads the arguments by hand so that each error names the
// field; an undeclared field is refused rather than ignored, because a
// model that sends one (run_in_background, a model id where selection is
// off) expects an effect it would not get.
func (t *delegateTool) parseArgs(raw json.RawMessage) (delegateArgs, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return delegateArgs{}, tool.Errorf(tool.CodeInvalidArgs, "the arguments must be a JSON object")
	}
	allowed := []string{"description", "prompt"}
	if t.o.Jobs != nil {
		allowed = append(allowed, "run_in_background")
	}
	if t.o.ModelSelection {
		allowed = append(allowed, "provider", "model", "reasoning_effort")
	}
	var a delegateArgs
	dest := map[string]*string{"description": &a.Description, "prompt": &a.Prompt, "provider": &a.Provider, "model": &a.Model, "reasoning_effort": &a.Effort}
	for k, v := range fields {
		if !slices.Contains(allowed, k) {
			return a, tool.Errorf(tool.CodeInvalidArgs, "unknown argument %q; %s takes %s", k, t.o.Name, strings.Join(allowed, ", "))
		}
		if string(v) == "null" {
			continue
		}
		if k == "run_in_background" {
			if err := json.Unmarshal(v, &a.Background); err != nil {
				return a, tool.Errorf(tool.CodeInvalidArgs, "run_in_background must be a boolean")
			}
			continue
		}
		if err := json.Unmarshal(v, dest[k]); err != nil {
			return a, tool.Errorf(tool.CodeInvalidArgs, "%s must be a string", k)
		}
		*dest[k] = strings.TrimSpace(*dest[k])
	}
	if a.Prompt == "" {
		return a, tool.Errorf(tool.CodeInvalidArgs, "prompt is required and must not be empty")
	}
	if a.Description == "" {
		return a, tool.Errorf(tool.CodeInvalidArgs, "description is required and must not be empty")
	}
	if _, err := llm.ParseEffort(a.Effort); err != nil {
		return a, tool.Errorf(tool.CodeInvalidArgs, "reasoning_effort %q is not one of off, low, high, max", a.Effort)
	}
	return a, nil
}

// runMeta is the tool result's Meta.
type runMeta struct {
	RunID      string     `json:"runId"`
	ChildID    string     `json:"childId"`
	Provider   string     `json:"provider"`
	StopReason string     `json:"stopReason"`
	Usage      *llm.Usage `json:"usage,omitempty"`
}

func (t *delegateTool) execute(ctx context.Context, c *tool.Call) (tool.Result, error) {
	args, err := t.parseArgs(c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	parent, err := t.o.ResolveLog(c)
	if err != nil {
		return tool.Result{}, fmt.Errorf("cannot find the calling session: %w", err)
	}
	req := Request{
		Label: args.Description, Prompt: []llm.Block{llm.TextBlock(args.Prompt)}, Parent: parent,
		Provider: args.Provider, Model: args.Model, Effort: args.Effort,
		OutputSchema: t.o.OutputSchema, MaxDepth: t.o.MaxDepth, Tools: t.o.Tools, Persona: t.o.Persona,
	}
	if args.Background {
		return t.background(ctx, c, req)
	}
	h, err := t.o.Service.Start(ctx, t.o.Provider, req)
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			return tool.Result{}, &tool.Error{Name: "SubagentError", Code: se.Code, Message: se.Message}
		}
		return tool.Result{}, err
	}
	// The run is bound to ctx, so a cancelled caller aborts the child and
	// this wait ends with the child's aborted result rather than early.
	res, werr := h.Wait(context.WithoutCancel(ctx))
	// Dispose before returning so no child outlives the call.
	derr := h.Dispose()
	meta := runMeta{RunID: h.RunID(), ChildID: h.ChildID(), Provider: h.Provider(), StopReason: res.StopReason}
	if !res.Usage.IsZero() {
		u := res.Usage
		meta.Usage = &u
	}
	rawMeta, _ := json.Marshal(meta)
	if err := errors.Join(werr, derr); err != nil {
		return tool.Result{}, fmt.Errorf("subagent run %s failed: %w", h.RunID(), err)
	}
	text := res.Text()
	if res.StopReason != StopCompleted {
		msg := "Error: the subagent " + failureText(res.StopReason)
		if res.Diagnostic != "" {
			msg += " — " + res.Diagnostic
		}
		if strings.TrimSpace(text) != "" {
			msg += "\n\nIts partial output:\n" + text
		}
		return tool.Result{
			Content: []llm.Block{llm.TextBlock(msg)}, IsError: true, Meta: rawMeta,
			Error: &tool.Error{Name: "SubagentError", Code: CodeSubagentFailed, Reason: res.StopReason, Message: msg},
		}, nil
	}
	var content []llm.Block
	if strings.TrimSpace(text) != "" {
		content = append(content, llm.TextBlock(text))
	}
	if res.Structured != nil {
		content = append(content, llm.TextBlock("Structured result:\n"+string(res.Structured)))
	}
	if len(content) == 0 {
		content = []llm.Block{llm.TextBlock("(the subagent finished without a text answer)")}
	}
	return tool.Result{Content: content, Meta: rawMeta}, nil
}

// background starts the child detached from this call (it outlives the
// step) and registers it as a job, so job_kill and the owner's disposal
// stop it and its end is reported like any background job's.
func (t *delegateTool) background(ctx context.Context, c *tool.Call, req Request) (tool.Result, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sink := &progressSink{}
	req.Progress = sink.line
	h, err := t.o.Service.Start(runCtx, t.o.Provider, req)
	if err != nil {
		cancel()
		var se *Error
		if errors.As(err, &se) {
			return tool.Result{}, &tool.Error{Name: "SubagentError", Code: se.Code, Message: se.Message}
		}
		return tool.Result{}, err
	}
	job, err := t.o.Jobs.Start(ctx, jobs.Spec{
		Kind: JobKind, Owner: c.SessionID, Description: req.Label,
		Run: func(jctx context.Context, out io.Writer) (jobs.Outcome, error) {
			defer cancel()
			stop := context.AfterFunc(jctx, cancel) // job_kill aborts the child
			defer stop()
			sink.attach(out)
			res, werr := h.Wait(context.WithoutCancel(jctx))
			derr := h.Dispose()
			sink.detach()
			fmt.Fprintf(out, "subagent %s (%s) %s\n", h.ChildID(), req.Label, res.StopReason)
			if text := res.Text(); text != "" {
				fmt.Fprintf(out, "%s\n", text)
			}
			if res.Structured != nil {
				fmt.Fprintf(out, "Structured result:\n%s\n", res.Structured)
			}
			if res.Diagnostic != "" {
				fmt.Fprintf(out, "diagnostic: %s\n", res.Diagnostic)
			}
			if err := errors.Join(werr, derr); err != nil {
				return jobs.Outcome{Failed: true, Note: err.Error()}, nil
			}
			return jobs.Outcome{Failed: res.StopReason != StopCompleted, Note: res.StopReason}, nil
		},
	})
	if err != nil {
		cancel()
		_ = h.Dispose()
		return tool.Result{}, err
	}
	meta, _ := json.Marshal(map[string]string{"jobId": job.ID, "runId": h.RunID(), "childId": h.ChildID()})
	return tool.Result{
		Content: []llm.Block{llm.TextBlock(fmt.Sprintf("Started subagent %s in the background as job %s (child session %s). Its answer arrives as a notice when it finishes; job_output %s reads it earlier, job_kill %s stops it.",
			req.Label, job.ID, h.ChildID(), job.ID, job.ID))},
		Meta: meta,
	}, nil
}

// JobKind is the job kind of background subagent runs.
const JobKind = "subagent"

func failureText(stop string) string {
	switch stop {
	case StopAborted:
		return "was cancelled"
	case StopError:
		return "failed"
	case StopMaxTokens:
		return "hit its token limit before finishing"
	case StopRefusal:
		return "declined the task"
	}
	return "ended abnormally (" + stop + ")"
}

// progressSink forwards a run's progress lines to its job's output. Lines
// reported before the job exists are kept (boundedly) and written when it
// attaches; lines after detach are dropped, since a job must not write to
// its output once its Run returned.
type progressSink struct {
	mu      sync.Mutex
	w       io.Writer
	pending []string
	done    bool
}

// maxPendingProgress bounds the lines kept before the job attaches.
const maxPendingProgress = 64

func (s *progressSink) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.done:
	case s.w != nil:
		fmt.Fprintln(s.w, l)
	case len(s.pending) < maxPendingProgress:
		s.pending = append(s.pending, l)
	}
}

func (s *progressSink) attach(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
	for _, l := range s.pending {
		fmt.Fprintln(w, l)
	}
	s.pending = nil
}

func (s *progressSink) detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w, s.done = nil, true
}
