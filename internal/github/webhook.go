// Package github is dsh serve's GitHub review webhook: a handler with only
// POST /github that verifies a delivery (content type, HMAC-SHA256
// signature over the raw body, headers, size), records it durably (a
// redelivery starts nothing), matches it against the configured
// repository rules, and starts a read-only review session through the
// session host in a worktree at the pull request's head commit. With a
// token configured, the final review is posted back through the REST API.
package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dsh-dev/dsh/internal/store"
)

// MaxBody is the largest delivery accepted (GitHub caps payloads at 25 MiB).
const MaxBody = 25 << 20

// Rule maps a repository to a local clone.
type Rule struct {
	Repo       string
	Path       string
	Permission string
}

// Config is the webhook's configuration.
type Config struct {
	Secret []byte
	// Token posts reviews back when not empty; the model never sees it.
	Token string
	// APIURL is the REST base (default https://api.github.com).
	APIURL string
	// Trigger is the comment text asking for a review (default "@dsh
	// review").
	Trigger string
	Model   string
	Rules   []Rule
	// WorktreeDir holds the review worktrees.
	WorktreeDir string
}

// Reviewer runs one review; Handler calls it on its own goroutine.
type Reviewer interface {
	Review(ctx context.Context, job Job) (sessionID string, err error)
}

// Job is one accepted review request.
type Job struct {
	Delivery string
	Rule     Rule
	PR       PullRequest
	Repo     string
}

// Handler is the webhook listener's http.Handler.
type Handler struct {
	cfg      Config
	store    store.Deliveries
	reviewer Reviewer
	logf     func(format string, args ...any)

	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the handler; Close ends the reviews it started.
func New(cfg Config, st store.Deliveries, r Reviewer, logf func(string, ...any)) *Handler {
	if cfg.Trigger == "" {
		cfg.Trigger = "@dsh review"
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Handler{cfg: cfg, store: st, reviewer: r, logf: logf, base: ctx, cancel: cancel}
}

// Close cancels the running reviews and waits for them.
func (h *Handler) Close() {
	h.cancel()
	h.wg.Wait()
}

// Wait waits for the reviews started so far (tests).
func (h *Handler) Wait() { h.wg.Wait() }

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func refuse(w http.ResponseWriter, code int, msg string) {
	reply(w, code, map[string]string{"error": msg})
}

// ServeHTTP checks, in order: the route, the content type (415), the
// signature over the raw body (401, the body is not parsed), the event
// and delivery headers (400) and the size (413, while reading).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/github" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(w, http.StatusMethodNotAllowed, "only POST /github")
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		refuse(w, http.StatusUnsupportedMediaType, "content type must be application/json")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		refuse(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	if !h.verify(r.Header.Get("X-Hub-Signature-256"), body) {
		refuse(w, http.StatusUnauthorized, "bad signature")
		return
	}
	event, delivery := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
	if event == "" || delivery == "" {
		refuse(w, http.StatusBadRequest, "X-GitHub-Event and X-GitHub-Delivery are required")
		return
	}
	if event == "ping" {
		reply(w, http.StatusOK, map[string]any{"ok": true})
		return
	}
	job, why, err := h.match(event, body)
	if err != nil {
		refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	outcome := "accepted"
	if job == nil {
		outcome = "ignored: " + why
	}
	fresh, err := h.store.RecordDelivery(r.Context(), store.Delivery{ID: delivery, Event: event, ReceivedAt: time.Now().UnixMilli(), Outcome: outcome})
	if err != nil {
		refuse(w, http.StatusInternalServerError, "record delivery: "+err.Error())
		return
	}
	if !fresh {
		reply(w, http.StatusOK, map[string]any{"duplicate": true})
		return
	}
	if job == nil {
		reply(w, http.StatusAccepted, map[string]any{"accepted": false, "reason": why})
		return
	}
	job.Delivery = delivery
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		id, err := h.reviewer.Review(h.base, *job)
		outcome := "session"
		if err != nil {
			outcome = "failed: " + err.Error()
			h.logf("github delivery %s: %v", delivery, err)
		}
		_ = h.store.SetDeliveryOutcome(context.WithoutCancel(h.base), delivery, outcome, id)
	}()
	reply(w, http.StatusAccepted, map[string]any{"accepted": true})
}

// verify compares X-Hub-Signature-256 with the HMAC-SHA256 of body in
// constant time.
func (h *Handler) verify(header string, body []byte) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(h.cfg.Secret) == 0 {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, h.cfg.Secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Sign is the X-Hub-Signature-256 value of body under secret.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// PullRequest is what a review needs of a pull request.
type PullRequest struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Draft  bool   `json:"draft"`
	Head   struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"base"`
}

type payload struct {
	Action      string       `json:"action"`
	PullRequest *PullRequest `json:"pull_request"`
	Repository  struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Sender struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"sender"`
	Issue *struct {
		Number      int             `json:"number"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	Comment *struct {
		Body string `json:"body"`
		User struct {
			Type string `json:"type"`
		} `json:"user"`
	} `json:"comment"`
}

// match decides whether a delivery starts a review: pull_request
// ready_for_review, opened when not a draft, or an issue_comment created on
// a pull request whose body mentions the trigger, never from a bot, for a
// configured repository. A nil job says why not.
func (h *Handler) match(event string, body []byte) (*Job, string, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, "", fmt.Errorf("payload: %w", err)
	}
	rule, ok := h.rule(p.Repository.FullName)
	if !ok {
		return nil, "repository " + p.Repository.FullName + " is not configured", nil
	}
	if p.Sender.Type == "Bot" {
		return nil, "sender is a bot", nil
	}
	switch event {
	case "pull_request":
		if p.PullRequest == nil {
			return nil, "", errors.New("payload: pull_request missing")
		}
		switch {
		case p.Action == "ready_for_review":
		case p.Action == "opened" && !p.PullRequest.Draft:
		case p.Action == "opened":
			return nil, "draft pull request", nil
		default:
			return nil, "action " + p.Action + " does not start a review", nil
		}
		return &Job{Rule: rule, PR: *p.PullRequest, Repo: p.Repository.FullName}, "", nil
	case "issue_comment":
		if p.Action != "created" {
			return nil, "action " + p.Action + " does not start a review", nil
		}
		if p.Issue == nil || len(p.Issue.PullRequest) == 0 || string(p.Issue.PullRequest) == "null" {
			return nil, "comment is not on a pull request", nil
		}
		if p.Comment == nil || !strings.Contains(p.Comment.Body, h.cfg.Trigger) {
			return nil, "comment does not ask for a review", nil
		}
		if p.Comment.User.Type == "Bot" {
			return nil, "comment is from a bot", nil
		}
		// The comment carries no head commit: the reviewer fetches the
		// pull request.
		return &Job{Rule: rule, PR: PullRequest{Number: p.Issue.Number}, Repo: p.Repository.FullName}, "", nil
	}
	return nil, "event " + event + " does not start a review", nil
}

func (h *Handler) rule(repo string) (Rule, bool) {
	for _, r := range h.cfg.Rules {
		if strings.EqualFold(r.Repo, repo) {
			return r, true
		}
	}
	return Rule{}, false
}
