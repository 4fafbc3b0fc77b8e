// Package github is dsh serve's GitHub review webhook: a handler with only
// POST /github that verifies a delivery (content type, HMAC-SHA256
// signature over the raw body, headers, size), records it durably (a
// redelivery starts nothing), matches it against the configured
// repository rules, and starts a read-only review session through the
// session host in a worktree at the pull request's head commit. With a
// token configured, the final review is posted back through the REST API.
package github

import (
	"bytes"
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

	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/store"
)

// MaxBody is the largest delivery accepted (GitHub caps payloads at 25 MiB).
const MaxBody = 25 << 20

// DefaultMaxUnverified bounds the requests whose body is being read and
// not yet verified; more at once are refused with 503.
const DefaultMaxUnverified = 4

// DefaultBodyTimeout bounds the reading of one delivery's body, so that a
// slow sender cannot hold one of the few unverified slots for long
// (GitHub sends its whole body at once).
const DefaultBodyTimeout = 20 * time.Second

// DefaultReviewLabel is the label that asks for a review.
const DefaultReviewLabel = "dsh-review"

// DefaultTrusted are the author associations whose comment or pull
// request starts a review.
var DefaultTrusted = []string{"OWNER", "MEMBER", "COLLABORATOR"}

// Associations are the author_association values GitHub sends.
var Associations = []string{"OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "MANNEQUIN", "NONE"}

// Rule maps a repository to a local clone.
type Rule struct {
	Repo       string
	Path       string
	Permission string
}

// Validate refuses a rule whose permission preset is unknown or would run
// a review unconfined (full-access: no sandbox, so reads cannot be
// confined and the network is on, for a pull request's hostile input).
func (r Rule) Validate() error {
	if r.Permission == "" {
		return nil
	}
	p, ok := permission.LookupPreset(r.Permission)
	if !ok {
		return fmt.Errorf("repository %s: unknown permission preset %q", r.Repo, r.Permission)
	}
	if p.Knobs.Mode == sandbox.DangerFullAccess {
		return fmt.Errorf("repository %s: permission %s would run reviews of hostile pull requests outside the sandbox; use read-only (the default), workspace-write or auto", r.Repo, r.Permission)
	}
	return nil
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
	// Trusted are the author associations that may ask for a review
	// (empty: DefaultTrusted).
	Trusted []string
	// ReviewLabel is the label whose addition asks for a review (default
	// DefaultReviewLabel). Adding a label takes triage access, so it is
	// a trusted person's ask, also on a fork's pull request.
	ReviewLabel string
	// AllowWeb offers the review session the web tools (web_fetch,
	// web_search); off by default.
	AllowWeb bool
	// MaxUnverified bounds concurrent unverified requests (default
	// DefaultMaxUnverified).
	MaxUnverified int
	// BodyTimeout bounds the reading of a body (default
	// DefaultBodyTimeout).
	BodyTimeout time.Duration
	// Secrets returns further secret values the posted review is
	// screened for (the serve token); nil for none.
	Secrets func() []string
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
	// Key is what the signed body asks for (see deliveryKey).
	Key string
}

// Handler is the webhook listener's http.Handler.
type Handler struct {
	cfg      Config
	store    store.Deliveries
	reviewer Reviewer
	logf     func(format string, args ...any)
	// unverified holds a slot per request whose body is being read.
	unverified chan struct{}

	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the handler; Close ends the reviews it started.
func New(cfg Config, st store.Deliveries, r Reviewer, logf func(string, ...any)) *Handler {
	cfg = cfg.withDefaults()
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Handler{cfg: cfg, store: st, reviewer: r, logf: logf, base: ctx, cancel: cancel,
		unverified: make(chan struct{}, cfg.MaxUnverified)}
}

func (c Config) withDefaults() Config {
	if c.Trigger == "" {
		c.Trigger = "@dsh review"
	}
	if len(c.Trusted) == 0 {
		c.Trusted = DefaultTrusted
	}
	if c.ReviewLabel == "" {
		c.ReviewLabel = DefaultReviewLabel
	}
	if c.MaxUnverified <= 0 {
		c.MaxUnverified = DefaultMaxUnverified
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	return c
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
// presence and form of the signature (401, before any of the body is
// read), the declared size (413), a free slot for an unverified body
// (503), the signature over the raw body, hashed while it is read (401,
// 413 past MaxBody; the body is not parsed before), then the event and
// delivery headers (400).
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
	want, ok := parseSignature(r.Header.Get("X-Hub-Signature-256"))
	if !ok || len(h.cfg.Secret) == 0 {
		refuse(w, http.StatusUnauthorized, "missing or malformed X-Hub-Signature-256")
		return
	}
	if r.ContentLength > MaxBody {
		refuse(w, http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	select {
	case h.unverified <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "1")
		refuse(w, http.StatusServiceUnavailable, "too many unverified deliveries at once")
		return
	}
	body, good, err := h.readVerified(w, r, want)
	<-h.unverified
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		refuse(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	if !good {
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
		h.logf("github delivery %s: ignored: a redelivery", delivery)
		reply(w, http.StatusOK, map[string]any{"duplicate": true})
		return
	}
	if job == nil {
		h.logf("github delivery %s (%s): ignored: %s", delivery, event, why)
		reply(w, http.StatusAccepted, map[string]any{"accepted": false, "reason": why})
		return
	}
	// The delivery id is not signed: what the body asks for is claimed
	// once, so a replay under a new id starts nothing.
	owner, fresh, err := h.store.ClaimDeliveryKey(r.Context(), job.Key, delivery)
	if err != nil {
		refuse(w, http.StatusInternalServerError, "record delivery: "+err.Error())
		return
	}
	if !fresh {
		why := "the same request as delivery " + owner
		h.logf("github delivery %s (%s): ignored: %s", delivery, event, why)
		_ = h.store.SetDeliveryOutcome(r.Context(), delivery, "ignored: "+why, "")
		reply(w, http.StatusOK, map[string]any{"duplicate": true, "reason": why})
		return
	}
	job.Delivery = delivery
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		id, err := h.reviewer.Review(h.base, *job)
		outcome := "session"
		var dup *DuplicateError
		var held *WithheldError
		switch {
		case errors.As(err, &dup):
			outcome = "ignored: " + err.Error()
			h.logf("github delivery %s: ignored: %v", delivery, err)
		case errors.As(err, &held):
			outcome = "withheld: " + err.Error()
			h.logf("github delivery %s: %v", delivery, err)
		case err != nil:
			outcome = "failed: " + err.Error()
			h.logf("github delivery %s: %v", delivery, err)
		}
		_ = h.store.SetDeliveryOutcome(context.WithoutCancel(h.base), delivery, outcome, id)
	}()
	reply(w, http.StatusAccepted, map[string]any{"accepted": true})
}

// parseSignature decodes "sha256=<64 hex digits>".
func parseSignature(header string) ([]byte, bool) {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return nil, false
	}
	got, err := hex.DecodeString(hexSig)
	return got, err == nil
}

// readVerified reads the body, at most MaxBody bytes, through the HMAC
// as it arrives (the buffer grows with what was sent, not with what was
// declared), and reports whether it matches want.
func (h *Handler) readVerified(w http.ResponseWriter, r *http.Request, want []byte) ([]byte, bool, error) {
	// Where the connection supports it (not in tests' recorders), a body
	// that does not arrive in time fails the read.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.cfg.BodyTimeout))
	mac := hmac.New(sha256.New, h.cfg.Secret)
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.TeeReader(http.MaxBytesReader(w, r.Body, MaxBody), mac)); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), hmac.Equal(want, mac.Sum(nil)), nil
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
	// AuthorAssociation is the author's relation to the repository
	// (OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, …).
	AuthorAssociation string `json:"author_association"`
	Head              struct {
		Ref  string   `json:"ref"`
		SHA  string   `json:"sha"`
		Repo *RepoRef `json:"repo"`
	} `json:"head"`
	Base struct {
		Ref  string   `json:"ref"`
		SHA  string   `json:"sha"`
		Repo *RepoRef `json:"repo"`
	} `json:"base"`
}

// RepoRef is a pull request's head or base repository.
type RepoRef struct {
	FullName string `json:"full_name"`
	Fork     bool   `json:"fork"`
}

// FromFork reports whether the pull request's head is in another
// repository than its base (a fork, or a head repository GitHub no
// longer knows: a deleted fork). The head repository's own fork flag
// is not asked: a branch of a repository that is itself a fork of
// another is a branch of the base, pushed by someone with write access.
func (pr PullRequest) FromFork() bool {
	h, b := pr.Head.Repo, pr.Base.Repo
	return h == nil || b == nil || !strings.EqualFold(h.FullName, b.FullName)
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
	Label *struct {
		Name string `json:"name"`
	} `json:"label"`
	Issue *struct {
		Number      int             `json:"number"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	Comment *struct {
		ID                int64  `json:"id"`
		Body              string `json:"body"`
		AuthorAssociation string `json:"author_association"`
		User              struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"user"`
	} `json:"comment"`
}

// match decides whether a delivery starts a review, for a configured
// repository, never from a bot:
//   - pull_request opened (not a draft) or ready_for_review, by a trusted
//     author (Config.Trusted), from a branch of the repository itself: a
//     fork's pull request waits until a trusted person asks;
//   - pull_request labeled with Config.ReviewLabel (labels take triage
//     access: a trusted person's ask, also for a fork);
//   - issue_comment created on a pull request by a trusted commenter,
//     mentioning Config.Trigger.
//
// A nil job says why not.
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
	repo := p.Repository.FullName
	switch event {
	case "pull_request":
		pr := p.PullRequest
		if pr == nil {
			return nil, "", errors.New("payload: pull_request missing")
		}
		switch p.Action {
		case "labeled":
			if p.Label == nil || !strings.EqualFold(p.Label.Name, h.cfg.ReviewLabel) {
				return nil, "label is not " + h.cfg.ReviewLabel, nil
			}
		case "opened", "ready_for_review":
			if p.Action == "opened" && pr.Draft {
				return nil, "draft pull request", nil
			}
			if !h.trusted(pr.AuthorAssociation) {
				return nil, fmt.Sprintf("author association %s is not trusted (a trusted person can comment %q or add the label %s)", orNone(pr.AuthorAssociation), h.cfg.Trigger, h.cfg.ReviewLabel), nil
			}
			if pr.FromFork() {
				return nil, fmt.Sprintf("pull request from a fork (a trusted person can comment %q or add the label %s)", h.cfg.Trigger, h.cfg.ReviewLabel), nil
			}
		default:
			return nil, "action " + p.Action + " does not start a review", nil
		}
		if !shaRE().MatchString(pr.Head.SHA) {
			return nil, "", fmt.Errorf("payload: head sha %q is not a commit id", pr.Head.SHA)
		}
		return &Job{Rule: rule, PR: *pr, Repo: repo, Key: deliveryKey(event, repo, pr.Number, pr.Head.SHA, 0)}, "", nil
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
		if !h.trusted(p.Comment.AuthorAssociation) {
			return nil, "commenter association " + orNone(p.Comment.AuthorAssociation) + " is not trusted", nil
		}
		if p.Comment.ID == 0 {
			return nil, "", errors.New("payload: comment id missing")
		}
		// The comment carries no head commit: the reviewer fetches the
		// pull request.
		return &Job{Rule: rule, PR: PullRequest{Number: p.Issue.Number}, Repo: repo, Key: deliveryKey(event, repo, p.Issue.Number, "", p.Comment.ID)}, "", nil
	}
	return nil, "event " + event + " does not start a review", nil
}

// deliveryKey is what a signed body asks for: a review of one head commit
// of a pull request (whatever the action: one review per commit), or the
// review one comment asks for.
func deliveryKey(event, repo string, pr int, sha string, comment int64) string {
	repo = strings.ToLower(repo)
	if comment != 0 {
		return fmt.Sprintf("%s %s#%d comment %d", event, repo, pr, comment)
	}
	return fmt.Sprintf("%s %s#%d head %s", event, repo, pr, sha)
}

func (h *Handler) trusted(assoc string) bool {
	for _, t := range h.cfg.Trusted {
		if strings.EqualFold(t, assoc) && assoc != "" {
			return true
		}
	}
	return false
}

func orNone(assoc string) string {
	if assoc == "" {
		return "(none)"
	}
	return assoc
}

func (h *Handler) rule(repo string) (Rule, bool) {
	for _, r := range h.cfg.Rules {
		if strings.EqualFold(r.Repo, repo) {
			return r, true
		}
	}
	return Rule{}, false
}
