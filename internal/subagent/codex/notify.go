package codex

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/jsonrpc"
)

// Bounds on images kept from a run.
const (
	maxImages     = 8
	maxImageBytes = 20 << 20
)

type turnRef struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

type threadItem struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	Text             string `json:"text"`
	Phase            string `json:"phase"`
	Command          string `json:"command"`
	Status           string `json:"status"`
	ExitCode         *int   `json:"exitCode"`
	Path             string `json:"path"`
	Server           string `json:"server"`
	Tool             string `json:"tool"`
	AggregatedOutput string `json:"aggregatedOutput"`
	Changes          []struct {
		Path string `json:"path"`
		Kind struct {
			Type string `json:"type"`
		} `json:"kind"`
	} `json:"changes"`
	Result *struct {
		Content []struct {
			Type     string `json:"type"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		} `json:"content"`
	} `json:"result"`
}

// mine reports whether a turn-scoped event belongs to this run's turn.
// Must be called with r.mu held.
func (r *run) mine(ref turnRef) bool {
	if r.threadID == "" || ref.ThreadID != r.threadID {
		return false
	}
	if r.turnID != "" {
		return ref.TurnID == r.turnID
	}
	return r.usage == nil || !r.usage.priorTurns[ref.TurnID]
}

func (r *run) onNotification(method string, params json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return
	}
	var ref turnRef
	_ = json.Unmarshal(params, &ref)
	switch method {
	case "account/rateLimits/updated":
		r.mergeRateLimits(params)
	case "thread/tokenUsage/updated":
		if r.usage != nil && ref.ThreadID == r.threadID {
			r.usage.observe(params)
		}
	case "item/agentMessage/delta":
		if !r.mine(ref) {
			return
		}
		var d struct {
			ItemID string `json:"itemId"`
			Delta  string `json:"delta"`
		}
		if json.Unmarshal(params, &d) == nil {
			it := r.item(d.ItemID, "agentMessage")
			if it.text.Len() < 1<<20 {
				it.text.WriteString(d.Delta)
			}
		}
	case "item/started", "item/completed":
		if !r.mine(ref) {
			return
		}
		var p struct {
			Item threadItem `json:"item"`
		}
		if json.Unmarshal(params, &p) != nil || p.Item.ID == "" {
			r.noteLocked("malformed %s notification ignored", method)
			return
		}
		if method == "item/started" {
			it := r.item(p.Item.ID, p.Item.Type)
			for _, c := range p.Item.Changes {
				it.paths = append(it.paths, c.Path)
			}
			return
		}
		r.itemCompleted(p.Item)
	case "turn/started":
		var p struct {
			ThreadID string `json:"threadId"`
			Turn     struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		if json.Unmarshal(params, &p) == nil && p.ThreadID == r.threadID && p.Turn.ID != "" && (r.turnID == "" || r.turnID == p.Turn.ID) &&
			(r.usage == nil || !r.usage.priorTurns[p.Turn.ID]) {
			r.checkpointLocked("turn-started", map[string]any{"turnId": p.Turn.ID})
		}
	case "turn/completed":
		var p struct {
			ThreadID string `json:"threadId"`
			Turn     struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		if json.Unmarshal(params, &p) != nil || p.ThreadID != r.threadID || p.Turn.ID == "" {
			return
		}
		if r.turnDone == nil {
			r.turnDone = map[string]json.RawMessage{}
		}
		r.turnDone[p.Turn.ID] = append(json.RawMessage(nil), params...)
		select {
		case r.completed <- struct{}{}:
		default:
		}
	case "error":
		if !r.mine(ref) {
			return
		}
		var p struct {
			Error struct {
				Message        string          `json:"message"`
				CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
			} `json:"error"`
			WillRetry bool `json:"willRetry"`
		}
		if json.Unmarshal(params, &p) != nil {
			return
		}
		r.lastError = errorText(p.Error.Message, p.Error.CodexErrorInfo)
		if p.WillRetry {
			r.progress("codex error (retrying): " + r.lastError)
		}
	case "warning", "configWarning":
		var p struct {
			Message string `json:"message"`
			Summary string `json:"summary"`
		}
		if json.Unmarshal(params, &p) == nil && (p.Message != "" || p.Summary != "") {
			r.noteLocked("codex %s: %s", method, clip(p.Message+p.Summary, 300))
		}
	}
}

func errorText(msg string, info json.RawMessage) string {
	if len(info) == 0 || string(info) == "null" {
		return msg
	}
	var s string
	if json.Unmarshal(info, &s) == nil {
		return msg + " [" + s + "]"
	}
	return msg + " [" + clip(string(info), 200) + "]"
}

func (r *run) item(id, typ string) *item {
	it, ok := r.items[id]
	if !ok {
		it = &item{typ: typ}
		if len(r.items) < 10000 {
			r.items[id] = it
		}
	}
	return it
}

// itemCompleted records a finished item and reports it. r.mu is held.
func (r *run) itemCompleted(ti threadItem) {
	it := r.item(ti.ID, ti.Type)
	switch ti.Type {
	case "agentMessage":
		text := ti.Text
		if text == "" {
			text = it.text.String()
		}
		m := &item{typ: ti.Type, phase: ti.Phase}
		m.text.WriteString(text)
		r.messages = append(r.messages, m)
		r.out.Activity.Messages++
		if ti.Phase == "commentary" && strings.TrimSpace(text) != "" {
			r.progress("codex: " + oneLine(text))
		}
	case "commandExecution":
		r.out.Activity.Commands++
		line := "$ " + oneLine(ti.Command)
		if ti.ExitCode != nil {
			line += fmt.Sprintf(" → exit %d", *ti.ExitCode)
		}
		if ti.Status != "" && ti.Status != "completed" {
			line += " (" + ti.Status + ")"
		}
		r.progress(line)
	case "fileChange":
		r.out.Activity.FileChanges++
		var parts []string
		for _, c := range ti.Changes {
			parts = append(parts, c.Kind.Type+" "+c.Path)
		}
		r.progress(fmt.Sprintf("file change (%s): %s", ti.Status, strings.Join(parts, ", ")))
	case "imageView":
		if ti.Path != "" {
			r.addImage(Image{Path: ti.Path})
			r.progress("image: " + ti.Path)
		}
	case "mcpToolCall":
		n := 0
		if ti.Result != nil {
			for _, c := range ti.Result.Content {
				if c.Type != "image" || c.Data == "" {
					continue
				}
				data, err := base64.StdEncoding.DecodeString(c.Data)
				if err != nil || len(data) > maxImageBytes {
					r.noteLocked("an image from tool %s/%s was not kept (%s)", ti.Server, ti.Tool, imageProblem(err, len(data)))
					continue
				}
				r.addImage(Image{MediaType: c.MimeType, Data: data, Bytes: len(data)})
				n++
			}
		}
		line := fmt.Sprintf("tool %s/%s (%s)", ti.Server, ti.Tool, ti.Status)
		if n > 0 {
			line += fmt.Sprintf(", %d image(s)", n)
		}
		r.progress(line)
	}
}

func imageProblem(err error, n int) string {
	if err != nil {
		return "undecodable data"
	}
	return fmt.Sprintf("%d bytes, over %d", n, maxImageBytes)
}

func (r *run) addImage(img Image) {
	if len(r.out.Images) >= maxImages {
		r.noteLocked("more than %d images; later ones dropped", maxImages)
		return
	}
	r.out.Images = append(r.out.Images, img)
}

func (r *run) mergeRateLimits(params json.RawMessage) {
	var p struct {
		RateLimits map[string]json.RawMessage `json:"rateLimits"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if r.rateLimits == nil {
		r.rateLimits = map[string]json.RawMessage{}
	}
	for k, v := range p.RateLimits {
		if string(v) != "null" {
			r.rateLimits[k] = v
		} else if _, ok := r.rateLimits[k]; !ok {
			r.rateLimits[k] = v
		}
	}
}

func oneLine(s string) string {
	return clip(strings.Join(strings.Fields(s), " "), 300)
}

// onRequest answers the app-server's approval requests from the run's
// permission mode; nobody is asked. An unanswered request would block the
// turn, so every request gets an answer.
func (r *run) onRequest(_ context.Context, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sealed {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the delegation has ended"}
	}
	full := r.req.mode == ModeFullAccess
	decide := func(kind, what string, ok bool) string {
		d := "decline"
		if ok {
			d = "accept"
		}
		r.out.Activity.Approvals++
		r.progress(fmt.Sprintf("approval (%s) %s → %s", kind, what, d))
		return d
	}
	switch method {
	case "item/commandExecution/requestApproval":
		var p struct {
			Command string `json:"command"`
		}
		_ = json.Unmarshal(params, &p)
		// A command asking for approval wants to leave the sandbox.
		return map[string]any{"decision": decide("command", oneLine(p.Command), full)}, nil
	case "item/fileChange/requestApproval":
		var p struct {
			ItemID    string  `json:"itemId"`
			GrantRoot *string `json:"grantRoot"`
		}
		_ = json.Unmarshal(params, &p)
		ok := full
		var paths []string
		if it := r.items[p.ItemID]; it != nil {
			paths = it.paths
		}
		if r.req.mode == ModeWorkspaceWrite && (p.GrantRoot == nil || *p.GrantRoot == "") && len(paths) > 0 {
			ok = true
			for _, path := range paths {
				if !within(r.req.Cwd, path) {
					ok = false
				}
			}
		}
		return map[string]any{"decision": decide("file change", strings.Join(paths, ", "), ok)}, nil
	case "item/permissions/requestApproval":
		var p struct {
			Permissions json.RawMessage `json:"permissions"`
		}
		_ = json.Unmarshal(params, &p)
		granted := json.RawMessage(`{}`)
		if full && len(p.Permissions) > 0 {
			granted = p.Permissions
		}
		decide("permissions", clip(string(p.Permissions), 200), full)
		return map[string]any{"permissions": granted, "scope": "turn"}, nil
	case "execCommandApproval", "applyPatchApproval":
		d := "denied"
		if full {
			d = "approved"
		}
		decide(method, "", full)
		return map[string]any{"decision": d}, nil
	case "mcpServer/elicitation/request":
		return map[string]any{"action": "decline", "content": nil, "_meta": nil}, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "dsh does not handle " + method}
}

func within(root, path string) bool {
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	rel, err := filepath.Rel(root, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// finishTurn maps turn/completed to the outcome.
func (r *run) finishTurn(raw json.RawMessage) {
	var p struct {
		Turn struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  *struct {
				Message        string          `json:"message"`
				CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
			} `json:"error"`
			Items []threadItem `json:"items"`
		} `json:"turn"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		r.fail(CategoryProtocol, "turn/completed: "+err.Error())
		return
	}
	r.mu.Lock()
	text, found := r.answer()
	if !found {
		for _, it := range p.Turn.Items {
			if it.Type == "agentMessage" {
				text, found = it.Text, true
			}
		}
	}
	lastErr := r.lastError
	r.mu.Unlock()
	r.out.Text = text
	r.checkpoint("turn-completed", map[string]any{"turnId": p.Turn.ID, "status": p.Turn.Status})
	switch p.Turn.Status {
	case "completed":
	case "interrupted":
		if r.interrupted {
			r.fail(r.cause("turn", fmt.Errorf("interrupted")))
		} else {
			r.fail(CategoryTurnFailed, "the turn was interrupted by the app-server")
		}
		return
	case "failed":
		msg := lastErr
		if p.Turn.Error != nil {
			msg = errorText(p.Turn.Error.Message, p.Turn.Error.CodexErrorInfo)
		}
		if msg == "" {
			msg = "no error detail"
		}
		r.fail(CategoryTurnFailed, "the Codex turn failed: "+msg)
		return
	default:
		r.fail(CategoryProtocol, fmt.Sprintf("turn/completed with unknown status %q", p.Turn.Status))
		return
	}
	if r.req.schema != nil {
		if !found {
			r.fail(CategorySchema, "the turn ended without an answer to check against output_schema")
			return
		}
		if err := r.req.schema.Validate([]byte(text)); err != nil {
			r.fail(CategorySchema, "the answer does not satisfy output_schema: "+err.Error())
			return
		}
		r.out.Structured = json.RawMessage(text)
	}
	r.out.Status = StatusCompleted
	if r.req.thread == ThreadSession && r.req.ThreadID == "" {
		r.p.remember(r.req.SessionKey, r.threadID)
	}
}

// answer picks the final agent message: the last with phase final_answer,
// else the last one. r.mu is held.
func (r *run) answer() (string, bool) {
	for i := len(r.messages) - 1; i >= 0; i-- {
		if r.messages[i].phase == "final_answer" {
			return r.messages[i].text.String(), true
		}
	}
	if n := len(r.messages); n > 0 {
		return r.messages[n-1].text.String(), true
	}
	return "", false
}

// teardown closes the app-server, confirms its group is gone and fills
// the process, cleanup, usage and rate-limit facts.
func (r *run) teardown() {
	r.mu.Lock()
	if r.usage != nil {
		r.out.Usage = r.usage.report()
	} else {
		r.out.Usage = UsageReport{Completeness: UsageUnknown}
	}
	if len(r.rateLimits) > 0 {
		r.out.RateLimits, _ = json.Marshal(r.rateLimits)
	}
	if r.out.Status != StatusCompleted && r.out.Text == "" {
		r.out.Text, _ = r.answer()
	}
	r.mu.Unlock()
	if r.claimed != "" {
		r.p.release(r.claimed)
	}
	if r.proc == nil {
		if r.out.Status == "" {
			r.fail(CategoryProtocol, "the run ended without a result")
		}
		return
	}
	// Closing stdin asks the app-server to exit; TERM follows if it
	// does not within the grace.
	_ = r.proc.Stdin().Close()
	select {
	case <-r.proc.Exited():
	case <-time.After(ExitGrace):
	}
	derr := r.handle.Dispose()
	r.conn.Close()
	r.mu.Lock()
	r.sealed = true
	r.mu.Unlock()
	if res, ok := r.handle.Result(); ok {
		r.out.Cleanup = CleanupFacts{Confirmed: res.Confirmed, Signals: res.Signals, Remaining: res.Remaining}
	}
	select {
	case <-r.proc.Exited():
		if info, err := r.proc.Wait(); err == nil {
			ef := &ExitFacts{Code: info.Code}
			if info.Signaled {
				ef.Signal = info.Signal.String()
			}
			r.out.Process.Exit = ef
		}
	default:
	}
	r.out.Process.Stderr = r.proc.StderrTail(stderrTail)
	if derr != nil {
		if r.out.Status == StatusCompleted {
			r.out.Status = ""
		}
		r.fail(CategoryCleanup, derr.Error())
		r.note("cleanup not confirmed: %v", derr)
	}
	if r.out.Status == "" {
		r.fail(CategoryProtocol, "the run ended without a result")
	}
}

func dedupe(notes []string) []string {
	seen := map[string]bool{}
	out := notes[:0]
	for _, n := range notes {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
