package codex

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/fs"
)

// ToolName is the default name of the delegation tool.
const ToolName = "subagent_codex"

// JobKind is the job kind of background delegations.
const JobKind = "codex"

// ToolOptions configure the subagent_codex tool.
type ToolOptions struct {
	// Provider runs the delegations. Required.
	Provider *Provider
	// Name is the model-facing name; default ToolName.
	Name string
	// Jobs, when set, offers run_in_background.
	Jobs *jobs.Registry
	// Images reports whether the calling model route accepts image
	// input; when false, images the run produced come back as a note.
	Images bool
	// MaxMode returns the widest permission mode the calling session
	// allows (its sandbox mode); nil or "" means no cap beyond the
	// configuration.
	MaxMode func(c *tool.Call) string
}

// NewTool returns the subagent_codex tool.
func NewTool(o ToolOptions) (tool.Definition, error) {
	if o.Provider == nil {
		return tool.Definition{}, fmt.Errorf("subagent_codex: provider is required")
	}
	if o.Name == "" {
		o.Name = ToolName
	}
	t := &codexTool{o: o}
	return tool.Definition{
		Name:            o.Name,
		Description:     toolDescription(o.Provider.cfg.ModelSelection),
		Parameters:      toolParameters(o.Provider.cfg.ModelSelection, o.Jobs != nil),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		// The pipeline's limit stays above the run's own deadline, which
		// reports better (a timeout_ms beyond it is cut at it).
		Timeout: max(subagent.ForegroundTimeout, o.Provider.cfg.Timeout+time.Minute),
		Execute: t.execute,
	}, nil
}

func toolDescription(modelSelection bool) string {
	s := `Delegate a self-contained task to OpenAI Codex (the user's own Codex CLI and account). Codex works in the given directory with its own tools (shell, patch) under the permission mode, and returns its final answer. It does not see this conversation: put everything it needs in prompt.
- thread_mode: ephemeral (default, forgotten afterwards), persistent (a durable thread you can continue), session (one thread reused by this session's sequential calls). A durable thread's answer ends with a marker line giving its id; pass it as thread_id to continue that thread.
- output_schema: an object-rooted JSON Schema; the answer is then exactly a JSON text verified against it.
- images: absolute paths of pictures to show Codex.
- permission_mode may only narrow the configured mode (read-only for review work).`
	if modelSelection {
		s += "\n- model and reasoning_effort choose the Codex model and thinking level for this call; omit them to keep Codex's own configuration."
	}
	return s
}

func toolParameters(modelSelection, background bool) json.RawMessage {
	props := []string{
		`"description":{"type":"string","description":"A short (3-5 word) description of the task, for display and thread names."}`,
		`"prompt":{"type":"string","description":"The complete, self-contained task for Codex."}`,
	}
	if modelSelection {
		props = append(props,
			`"model":{"type":"string","description":"Codex model id for this call. Omit to use Codex's configured model."}`,
			`"reasoning_effort":{"type":"string","enum":["none","minimal","low","medium","high","xhigh"],"description":"Reasoning effort for this turn. Omit for Codex's default."}`)
	}
	props = append(props,
		`"output_schema":{"type":"object","description":"Object-rooted JSON Schema the final answer must satisfy; the answer is then the exact JSON text."}`,
		`"images":{"type":"array","items":{"type":"string"},"description":"Absolute paths of existing image files to show Codex."}`,
		`"cwd":{"type":"string","description":"Absolute working directory for Codex. Default: this session's directory."}`,
		`"thread_mode":{"type":"string","enum":["ephemeral","persistent","session"],"description":"Thread lifetime (default ephemeral)."}`,
		`"thread_id":{"type":"string","description":"Continue this durable Codex thread (from an earlier answer's marker line)."}`,
		`"permission_mode":{"type":"string","enum":["read-only","workspace-write","danger-full-access"],"description":"Narrow Codex's permissions for this call (e.g. read-only for review)."}`,
		`"timeout_ms":{"type":"integer","minimum":0,"description":"Deadline for the whole delegation in milliseconds (default 10 minutes; 0 = none)."}`)
	if background {
		props = append(props, `"run_in_background":{"type":"boolean","description":"Run as a background job and return its id at once; progress and the answer are read with job_output."}`)
	}
	return json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") +
		`},"required":["description","prompt"],"additionalProperties":false}`)
}

type codexTool struct{ o ToolOptions }

func (t *codexTool) parse(raw json.RawMessage) (Params, bool, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Params{}, false, tool.Errorf(tool.CodeInvalidArgs, "the arguments must be a JSON object")
	}
	allowed := []string{"description", "prompt", "output_schema", "images", "cwd", "thread_mode", "thread_id", "permission_mode", "timeout_ms"}
	if t.o.Provider.cfg.ModelSelection {
		allowed = append(allowed, "model", "reasoning_effort")
	}
	if t.o.Jobs != nil {
		allowed = append(allowed, "run_in_background")
	}
	var p Params
	var bg bool
	strs := map[string]*string{
		"description": &p.Description, "prompt": &p.Prompt, "model": &p.Model, "reasoning_effort": &p.Effort,
		"cwd": &p.Cwd, "thread_mode": &p.ThreadMode, "thread_id": &p.ThreadID, "permission_mode": &p.PermissionMode,
	}
	for k, v := range fields {
		if !slices.Contains(allowed, k) {
			return p, false, tool.Errorf(tool.CodeInvalidArgs, "unknown argument %q; %s takes %s", k, t.o.Name, strings.Join(allowed, ", "))
		}
		if string(v) == "null" {
			continue
		}
		var err error
		switch k {
		case "output_schema":
			if len(v) == 0 || v[0] != '{' {
				err = fmt.Errorf("output_schema must be a JSON Schema object")
			}
			p.OutputSchema = v
		case "images":
			if json.Unmarshal(v, &p.Images) != nil {
				err = fmt.Errorf("images must be an array of absolute paths")
			}
		case "timeout_ms":
			var ms int64
			if json.Unmarshal(v, &ms) != nil || ms < 0 {
				err = fmt.Errorf("timeout_ms must be a non-negative integer")
			}
			d := time.Duration(ms) * time.Millisecond
			p.Timeout = &d
		case "run_in_background":
			if json.Unmarshal(v, &bg) != nil {
				err = fmt.Errorf("run_in_background must be a boolean")
			}
		default:
			if json.Unmarshal(v, strs[k]) != nil {
				err = fmt.Errorf("%s must be a string", k)
			}
			*strs[k] = strings.TrimSpace(*strs[k])
		}
		if err != nil {
			return p, false, tool.Errorf(tool.CodeInvalidArgs, "%v", err)
		}
	}
	if p.Prompt == "" {
		return p, false, tool.Errorf(tool.CodeInvalidArgs, "prompt is required and must not be empty")
	}
	if p.Description == "" {
		return p, false, tool.Errorf(tool.CodeInvalidArgs, "description is required and must not be empty")
	}
	return p, bg, nil
}

func (t *codexTool) caller(c *tool.Call) Caller {
	cl := Caller{Cwd: c.Cwd}
	if t.o.MaxMode != nil {
		cl.MaxMode = t.o.MaxMode(c)
	}
	return cl
}

// toolMeta is the result's Meta: identifiers and the run's facts, without
// the answer itself.
type toolMeta struct {
	RunID      string      `json:"runId"`
	JobID      string      `json:"jobId,omitempty"`
	ThreadID   string      `json:"threadId,omitempty"`
	TurnID     string      `json:"turnId,omitempty"`
	ThreadMode string      `json:"threadMode,omitempty"`
	Status     string      `json:"status,omitempty"`
	Category   string      `json:"category,omitempty"`
	Usage      UsageReport `json:"usage"`
	Cleanup    bool        `json:"cleanupConfirmed"`
}

func (t *codexTool) execute(ctx context.Context, c *tool.Call) (tool.Result, error) {
	p, bg, err := t.parse(c.Arguments)
	if err != nil {
		return tool.Result{}, err
	}
	p.SessionKey = c.SessionID
	caller := t.caller(c)
	// Refuse bad requests before anything is spawned or a job created.
	if _, err := resolve(p, &t.o.Provider.cfg, t.o.Provider.maxMode(caller), t.defaultCwd(caller)); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "%v", err)
	}
	if bg {
		return t.background(ctx, c, p, caller)
	}
	out := t.o.Provider.Delegate(ctx, p, caller, Observer{})
	return t.result(out), nil
}

func (t *codexTool) defaultCwd(c Caller) string {
	if t.o.Provider.cfg.Dir != "" {
		return t.o.Provider.cfg.Dir
	}
	return c.Cwd
}

func meta(out Outcome, jobID string) json.RawMessage {
	m, _ := json.Marshal(toolMeta{
		RunID: out.RunID, JobID: jobID, ThreadID: out.ThreadID, TurnID: out.TurnID, ThreadMode: out.ThreadMode,
		Status: out.Status, Category: out.Category, Usage: out.Usage, Cleanup: out.Cleanup.Confirmed,
	})
	return m
}

// durable reports whether the run's thread can be continued.
func durable(out Outcome) bool {
	return out.ThreadID != "" && out.ThreadMode != ThreadEphemeral
}

// Marker is the line ending a durable thread's human-text answer.
func Marker(out Outcome) string {
	return fmt.Sprintf("[codex thread %s · %s · pass it as thread_id to continue]", out.ThreadID, out.ThreadMode)
}

// ErrorCode is the stable tool error code for a failure category.
func ErrorCode(category string) string {
	return "CODEX_" + strings.ToUpper(strings.ReplaceAll(category, "-", "_"))
}

func (t *codexTool) result(out Outcome) tool.Result {
	if out.Status != StatusCompleted {
		msg := fmt.Sprintf("Error: the Codex delegation %s (%s): %s", map[bool]string{true: "was cancelled", false: "failed"}[out.Status == StatusAborted], out.Category, out.Error)
		if strings.TrimSpace(out.Text) != "" {
			msg += "\n\nIts partial output:\n" + out.Text
		}
		if durable(out) && out.TurnID != "" {
			msg += "\n\n" + Marker(out)
		}
		return tool.Result{
			Content: []llm.Block{llm.TextBlock(msg)}, IsError: true, Meta: meta(out, ""),
			Error: &tool.Error{Name: "CodexError", Code: ErrorCode(out.Category), Reason: out.Category, Message: msg},
		}
	}
	var content []llm.Block
	switch {
	case out.Structured != nil:
		// Machine-readable answers stay pure JSON; the thread id is in Meta.
		content = append(content, llm.TextBlock(out.Text))
	default:
		text := out.Text
		if strings.TrimSpace(text) == "" {
			text = "(Codex finished without a text answer)"
		}
		if durable(out) {
			text += "\n\n" + Marker(out)
		}
		content = append(content, llm.TextBlock(text))
	}
	content = append(content, t.images(out.Images)...)
	return tool.Result{Content: content, Meta: meta(out, "")}
}

// images turns the run's pictures into blocks for a route that accepts
// them, else into one note. An image problem never fails the delegation.
func (t *codexTool) images(imgs []Image) []llm.Block {
	if len(imgs) == 0 {
		return nil
	}
	if !t.o.Images {
		return []llm.Block{llm.TextBlock(fmt.Sprintf("[%d image(s) not delivered: this model route declares no image input%s]", len(imgs), pathList(imgs)))}
	}
	var blocks []llm.Block
	var problems []string
	for _, img := range imgs {
		b, err := imageBlock(img)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		blocks = append(blocks, b)
	}
	if len(problems) > 0 {
		blocks = append(blocks, llm.TextBlock("[image not delivered: "+strings.Join(problems, "; ")+"]"))
	}
	return blocks
}

func pathList(imgs []Image) string {
	var paths []string
	for _, img := range imgs {
		if img.Path != "" {
			paths = append(paths, img.Path)
		}
	}
	if len(paths) == 0 {
		return ""
	}
	return ": " + strings.Join(paths, ", ")
}

func imageBlock(img Image) (llm.Block, error) {
	data := img.Data
	if data == nil {
		f, err := os.Open(img.Path)
		if err != nil {
			return llm.Block{}, fmt.Errorf("%s: %v", img.Path, err)
		}
		data, err = io.ReadAll(io.LimitReader(f, maxImageBytes+1))
		f.Close()
		if err != nil {
			return llm.Block{}, fmt.Errorf("%s: %v", img.Path, err)
		}
		if len(data) > maxImageBytes {
			return llm.Block{}, fmt.Errorf("%s is over %d bytes", img.Path, maxImageBytes)
		}
	}
	// Downscale to what every model API accepts, as read_image does.
	prepared, err := fs.PrepareImage(data, deliverMaxSide, deliverMaxBytes)
	if err != nil {
		name := img.Path
		if name == "" {
			name = "a tool result image"
		}
		return llm.Block{}, fmt.Errorf("%s: %v", name, err)
	}
	return llm.Block{Type: llm.BlockImage, MediaType: prepared.MediaType, Data: base64.StdEncoding.EncodeToString(prepared.Data)}, nil
}

// Bounds on a delivered image, as read_image applies them.
const (
	deliverMaxSide  = 2000
	deliverMaxBytes = 3_750_000
)

func (t *codexTool) background(ctx context.Context, c *tool.Call, p Params, caller Caller) (tool.Result, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	job, err := t.o.Jobs.Start(ctx, jobs.Spec{
		Kind: JobKind, Owner: c.SessionID, Description: p.Description,
		Run: func(jctx context.Context, w io.Writer) (jobs.Outcome, error) {
			defer cancel()
			stop := context.AfterFunc(jctx, cancel)
			defer stop()
			out := t.o.Provider.Delegate(runCtx, p, caller, Observer{
				Checkpoint: func(cp Checkpoint) {
					if cp.Name == "thread" {
						fmt.Fprintf(w, "codex thread %v\n", cp.Data["threadId"])
					}
				},
				Progress: func(line string) { fmt.Fprintln(w, line) },
			})
			fmt.Fprintf(w, "codex delegation %s\n", out.Status)
			if out.Status != StatusCompleted {
				fmt.Fprintf(w, "error (%s): %s\n", out.Category, out.Error)
			}
			if out.Text != "" {
				fmt.Fprintln(w, out.Text)
			}
			if n := len(out.Images); n > 0 {
				fmt.Fprintf(w, "[%d image(s)%s]\n", n, pathList(out.Images))
			}
			if durable(out) && out.Structured == nil && out.TurnID != "" {
				fmt.Fprintln(w, Marker(out))
			}
			return jobs.Outcome{Failed: out.Status != StatusCompleted, Note: out.Status}, nil
		},
	})
	if err != nil {
		cancel()
		return tool.Result{}, err
	}
	m, _ := json.Marshal(map[string]string{"jobId": job.ID})
	return tool.Result{
		Content: []llm.Block{llm.TextBlock(fmt.Sprintf("Started Codex delegation %q in the background as job %s. Progress and the answer are read with job_output %s; job_kill %s stops it.", p.Description, job.ID, job.ID, job.ID))},
		Meta:    m,
	}, nil
}
