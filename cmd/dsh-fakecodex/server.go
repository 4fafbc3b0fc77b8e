package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/uuid"
)

// server is one app-server connection. Everything runs on the goroutine of
// serve except readLoop, so ordering on stdout is simply program order.
type server struct {
	script *Script
	home   string
	store  *store
	out    io.Writer
	stderr io.Writer
	log    *logger

	in   chan *inMsg
	werr error

	initialized bool
	clientName  string
	optOut      map[string]bool

	threads   map[string]*threadRecord // loaded by this connection
	active    *activeTurn
	turnIdx   int
	nextReqID int64
	msgSeq    int
	callSeq   int
}

func newServer(script *Script, home string, out, stderr io.Writer, lg *logger) *server {
	return &server{
		script:  script,
		home:    home,
		store:   &store{dir: filepath.Join(home, "fake-threads"), locks: map[string]*os.File{}},
		out:     out,
		stderr:  stderr,
		log:     lg,
		optOut:  map[string]bool{},
		threads: map[string]*threadRecord{},
	}
}

// serve runs until stdin ends or the script ends the process; it returns
// the exit status.
func (s *server) serve(stdin io.Reader) int {
	s.in = make(chan *inMsg)
	done := make(chan struct{})
	defer close(done)
	go readLoop(stdin, s.log, s.in, done)
	var err error
	for err == nil {
		m, ok := <-s.in
		if !ok {
			err = errEOF
			break
		}
		err = s.handle(m)
		if err == nil && s.werr != nil {
			err = errWrite
		}
	}
	return s.finish(err)
}

func (s *server) finish(err error) int {
	code, reason := 0, "eof"
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		if s.script.Stderr != "" {
			msg := s.script.Stderr
			if !strings.HasSuffix(msg, "\n") {
				msg += "\n"
			}
			_, _ = io.WriteString(s.stderr, msg)
		}
		code, reason = ee.code, "exit_at"
	case errors.Is(err, errHang):
		for range s.in { // ignore everything until EOF
		}
		reason = "hang"
	case errors.Is(err, errWrite):
		fmt.Fprintln(s.stderr, "dsh-fakecodex: write stdout:", s.werr)
		code, reason = 1, "write"
	}
	s.log.event("exit", "code", code, "reason", reason)
	return code
}

// checkpoint applies hang_at / exit_at for the point reached.
func (s *server) checkpoint(point string) error {
	switch {
	case s.script.ExitAt == point:
		code := 1
		if s.script.ExitCode != nil {
			code = *s.script.ExitCode
		}
		return &exitError{code: code}
	case s.script.HangAt == point:
		return errHang
	}
	return nil
}

var knownMethods = []string{"initialize", "thread/start", "thread/resume", "thread/name/set", "turn/start", "turn/interrupt"}

// handle processes one frame outside a turn (and, via await, inside one).
func (s *server) handle(m *inMsg) error {
	if !m.isRequest() {
		return nil // notifications (initialized included) and stray responses
	}
	known := false
	for _, k := range knownMethods {
		known = known || k == m.Method
	}
	if !known {
		s.replyErr(m.ID, unknownVariant(m.Method, append(knownMethods, "…")...))
		return nil
	}
	if m.Method == "initialize" {
		return s.initialize(m)
	}
	if !s.initialized {
		s.replyErr(m.ID, plainf("Not initialized"))
		return nil
	}
	var err error
	switch m.Method {
	case "thread/start":
		err = s.threadStart(m)
	case "thread/resume":
		err = s.threadResume(m)
	case "thread/name/set":
		err = s.threadNameSet(m)
	case "turn/start":
		err = s.turnStart(m)
	case "turn/interrupt":
		err = s.turnInterrupt(m)
	}
	var re *reqError
	if errors.As(err, &re) {
		s.replyErr(m.ID, re)
		return nil
	}
	return err
}

func (s *server) initialize(m *inMsg) error {
	if s.initialized {
		s.replyErr(m.ID, plainf("Already initialized"))
		return nil
	}
	var p struct {
		ClientInfo *struct {
			Name    *string `json:"name"`
			Title   *string `json:"title"`
			Version *string `json:"version"`
		} `json:"clientInfo"`
		Capabilities *struct {
			OptOutNotificationMethods []string `json:"optOutNotificationMethods"`
		} `json:"capabilities"`
	}
	if e := decodeParams(m.Params, &p); e != nil {
		s.replyErr(m.ID, e)
		return nil
	}
	switch {
	case p.ClientInfo == nil:
		s.replyErr(m.ID, missingField("clientInfo"))
		return nil
	case p.ClientInfo.Name == nil:
		s.replyErr(m.ID, missingField("name"))
		return nil
	case p.ClientInfo.Version == nil:
		s.replyErr(m.ID, missingField("version"))
		return nil
	}
	if err := s.checkpoint("initialize"); err != nil {
		return err
	}
	s.initialized = true
	s.clientName = *p.ClientInfo.Name
	if p.Capabilities != nil {
		for _, name := range p.Capabilities.OptOutNotificationMethods {
			s.optOut[name] = true
		}
	}
	osName := runtime.GOOS
	if osName == "darwin" {
		osName = "macos"
	}
	s.reply(m.ID, struct {
		UserAgent      string `json:"userAgent"`
		CodexHome      string `json:"codexHome"`
		PlatformFamily string `json:"platformFamily"`
		PlatformOs     string `json:"platformOs"`
	}{
		UserAgent: fmt.Sprintf("%s/%s (dsh-fakecodex; %s) dsh-fakecodex (%s; %s)",
			s.clientName, cliVersion, runtime.GOARCH, s.clientName, *p.ClientInfo.Version),
		CodexHome:      s.home,
		PlatformFamily: "unix",
		PlatformOs:     osName,
	})
	s.notify("configWarning", map[string]any{
		"summary": "dsh-fakecodex: this is a scripted fake of codex app-server; nothing is sandboxed or executed.",
		"details": nil,
	})
	s.notify("remoteControl/status/changed", map[string]any{
		"status": "disabled", "serverName": "dsh-fakecodex", "installationId": newID(), "environmentId": nil,
	})
	return nil
}

// threadParams are the thread/start and thread/resume params the fake uses.
type threadParams struct {
	ThreadID          *string         `json:"threadId"`
	Model             *string         `json:"model"`
	ModelProvider     *string         `json:"modelProvider"`
	Cwd               *string         `json:"cwd"`
	ApprovalPolicy    json.RawMessage `json:"approvalPolicy"`
	ApprovalsReviewer *string         `json:"approvalsReviewer"`
	Sandbox           json.RawMessage `json:"sandbox"`
	Ephemeral         *bool           `json:"ephemeral"`
	ExcludeTurns      bool            `json:"excludeTurns"`
}

// validate checks enums and returns the approval policy and sandbox policy
// given (nil when absent).
func (p *threadParams) validate() (approval, sandbox json.RawMessage, e *reqError) {
	if approval, e = checkApproval(p.ApprovalPolicy); e != nil {
		return nil, nil, e
	}
	if len(p.Sandbox) > 0 && !isNull(p.Sandbox) {
		var mode string
		if json.Unmarshal(p.Sandbox, &mode) != nil {
			return nil, nil, invalidf("invalid type: %s, expected a sandbox mode string", p.Sandbox)
		}
		switch mode {
		case "read-only", "workspace-write", "danger-full-access":
			sandbox = sandboxPolicy(mode)
		default:
			return nil, nil, unknownVariant(mode, "read-only", "workspace-write", "danger-full-access")
		}
	}
	if p.ApprovalsReviewer != nil {
		switch *p.ApprovalsReviewer {
		case "user", "auto_review", "guardian_subagent":
		default:
			return nil, nil, unknownVariant(*p.ApprovalsReviewer, "user", "auto_review", "guardian_subagent")
		}
	}
	return approval, sandbox, nil
}

// checkApproval validates an AskForApproval value; nil when absent.
func checkApproval(raw json.RawMessage) (json.RawMessage, *reqError) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		switch str {
		case "untrusted", "on-request", "never":
			return raw, nil
		}
		return nil, unknownVariant(str, "untrusted", "on-request", "granular", "never")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		if _, ok := obj["granular"]; ok && len(obj) == 1 {
			return raw, nil
		}
		for k := range obj {
			if k != "granular" {
				return nil, unknownVariant(k, "untrusted", "on-request", "granular", "never")
			}
		}
	}
	return nil, invalidf("invalid type: %s, expected an approval policy", raw)
}

func (s *server) threadStart(m *inMsg) error {
	var p threadParams
	if e := decodeParams(m.Params, &p); e != nil {
		return e
	}
	approval, sandbox, e := p.validate()
	if e != nil {
		return e
	}
	if err := s.checkpoint("thread/start"); err != nil {
		return err
	}
	now := time.Now().Unix()
	rec := &threadRecord{
		ID:                newID(),
		Model:             "fake-model",
		ModelProvider:     "fake",
		ApprovalPolicy:    json.RawMessage(`"on-request"`),
		ApprovalsReviewer: "user",
		Sandbox:           sandboxPolicy("read-only"),
		CreatedAt:         now,
		UpdatedAt:         now,
		Turns:             []turnRecord{},
	}
	rec.Cwd, _ = os.Getwd()
	if p.Ephemeral != nil {
		rec.Ephemeral = *p.Ephemeral
	}
	s.applyOverrides(rec, &p, approval, sandbox)
	if !rec.Ephemeral {
		if err := s.store.lock(rec.ID); err != nil {
			return asReqError(err)
		}
	}
	s.threads[rec.ID] = rec
	s.reply(m.ID, s.threadResult(rec, true))
	s.notify("thread/started", map[string]any{"thread": s.threadJSON(rec, true)})
	return nil
}

func (s *server) applyOverrides(rec *threadRecord, p *threadParams, approval, sandbox json.RawMessage) {
	if p.Model != nil {
		rec.Model = *p.Model
	}
	if p.ModelProvider != nil {
		rec.ModelProvider = *p.ModelProvider
	}
	if p.Cwd != nil {
		rec.Cwd = *p.Cwd
	}
	if approval != nil {
		rec.ApprovalPolicy = approval
	}
	if sandbox != nil {
		rec.Sandbox = sandbox
	}
	if p.ApprovalsReviewer != nil {
		rec.ApprovalsReviewer = *p.ApprovalsReviewer
	}
}

func (s *server) threadResume(m *inMsg) error {
	var p threadParams
	if e := decodeParams(m.Params, &p); e != nil {
		return e
	}
	if p.ThreadID == nil {
		return missingField("threadId")
	}
	approval, sandbox, e := p.validate()
	if e != nil {
		return e
	}
	if err := s.checkpoint("thread/resume"); err != nil {
		return err
	}
	id := *p.ThreadID
	rec := s.threads[id]
	if rec == nil {
		loaded, err := s.store.load(id)
		if errors.Is(err, os.ErrNotExist) {
			return plainf("no rollout found for thread id %s", id)
		}
		if err != nil {
			return plainf("failed to load rollout for thread id %s: %v", id, err)
		}
		if err := s.store.lock(id); err != nil {
			return asReqError(err)
		}
		rec = loaded
		s.threads[id] = rec
	}
	if !s.script.ResumeIgnoreOverrides {
		s.applyOverrides(rec, &p, approval, sandbox)
	}
	if !p.ExcludeTurns {
		s.notify("deprecationNotice", map[string]any{
			"summary": "Full-history hydration is deprecated for paginated threads; use `excludeTurns: true`, then page with `thread/turns/list` and `thread/items/list`.",
			"details": nil,
		})
	}
	s.reply(m.ID, s.threadResult(rec, !p.ExcludeTurns))
	if u := rec.Usage; u != nil {
		s.notify("thread/tokenUsage/updated", tokenUsageUpdated{
			ThreadID: id, TurnID: u.TurnID,
			TokenUsage: tokenUsage{Total: u.Total, Last: u.Last, ModelContextWindow: u.ModelContextWindow},
		})
	}
	return nil
}

func (s *server) threadNameSet(m *inMsg) error {
	var p struct {
		ThreadID *string `json:"threadId"`
		Name     *string `json:"name"`
	}
	if e := decodeParams(m.Params, &p); e != nil {
		return e
	}
	switch {
	case p.ThreadID == nil:
		return missingField("threadId")
	case p.Name == nil:
		return missingField("name")
	}
	rec, err := s.loaded(*p.ThreadID)
	if err != nil {
		return err
	}
	rec.Name = p.Name
	if !rec.Ephemeral && len(rec.Turns) > 0 {
		if err := s.store.save(rec); err != nil {
			return plainf("failed to persist thread name: %v", err)
		}
	}
	s.reply(m.ID, struct{}{})
	s.notify("thread/name/updated", map[string]any{"threadId": rec.ID, "threadName": *p.Name})
	return nil
}

// loaded returns a thread this connection has loaded, or the error for one
// it has not: the active-writer error when another process holds it.
func (s *server) loaded(id string) (*threadRecord, error) {
	if rec := s.threads[id]; rec != nil {
		return rec, nil
	}
	if e := s.store.heldElsewhere(id); e != nil {
		return nil, e
	}
	return nil, plainf("thread not found: %s", id)
}

// turnInterrupt answers turn/interrupt and marks the active turn
// interrupted when the request names it (and the script does not ignore
// interrupts). A loaded thread gets {} even when no such turn is running.
func (s *server) turnInterrupt(m *inMsg) error {
	var p struct {
		ThreadID *string `json:"threadId"`
		TurnID   *string `json:"turnId"`
	}
	if e := decodeParams(m.Params, &p); e != nil {
		return e
	}
	switch {
	case p.ThreadID == nil:
		return missingField("threadId")
	case p.TurnID == nil:
		return missingField("turnId")
	}
	if _, err := s.loaded(*p.ThreadID); err != nil {
		return err
	}
	s.reply(m.ID, struct{}{})
	if at := s.active; at != nil && at.th.ID == *p.ThreadID && at.id == *p.TurnID && !s.script.IgnoreInterrupt {
		at.interrupted = true
	}
	return nil
}

func asReqError(err error) *reqError {
	var re *reqError
	if errors.As(err, &re) {
		return re
	}
	return plainf("%v", err)
}

func newID() string {
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}
