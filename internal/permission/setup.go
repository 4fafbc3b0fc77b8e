package permission

import (
	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Config is what one session's permission wiring needs.
type Config struct {
	Log      *session.Log
	Defaults Defaults
	// Sandbox confines bash commands; nil means no backend, so only
	// danger-full-access commands can run (others fail with
	// SANDBOX_UNAVAILABLE).
	Sandbox Confiner
	// CheckWrite fences the file tools' writes; nil leaves them unfenced.
	CheckWrite WriteChecker
	// CheckRead fences the file tools' reads (sandbox.Policy.CheckRead:
	// the deny-read list and read confinement of the session's policy);
	// nil leaves them unfenced.
	CheckRead ReadChecker
	// Workspace is the writable root; "" is each call's cwd (the session
	// cwd).
	Workspace string
	// WritableRoots are extra writable directories in workspace-write.
	WritableRoots []string
	// UnixSockets are the pathname UNIX sockets outside the workspace
	// that confined commands may connect to (sandbox.Policy.UnixSockets).
	UnixSockets []string
	// Reads are what confined commands and the file tools may read
	// (sandbox.Policy's DenyRead, ConfineReads, ReadRoots) and the extra
	// paths that stay read-only (Protected), in every confined mode.
	Reads Reads
	// Protected returns extra paths that stay read-only although they lie
	// in a writable root (sandbox.Policy.Protected): the repository files
	// trusted hooks run. It is asked for every command and file-tool
	// write, so a file trusted mid-session is protected from then on; nil
	// protects nothing extra.
	Protected func() []string
	// Rules are the configured permission rules.
	Rules []Rule
	// Human answers asks (a Terminal); nil when no one is attached.
	Human Answerer
	// PlanMode, when it reports true, clamps bash commands and the write
	// fence to the read-only sandbox whatever the session's mode (plan
	// mode: the model may look but not change). Nil means never.
	PlanMode func() bool
	// Reviewer answers asks under preset auto. A copy is used, with Log
	// and Fallback (Human) filled in when unset.
	Reviewer *AutoReviewer
}

// Session is one session's permission machinery, built by New.
type Session struct {
	Log        *session.Log
	Defaults   Defaults
	Grants     *Grants
	Confiner   *BashConfiner
	Escalation *Escalation
	// Rules is nil when none are configured.
	Rules     *Rules
	Approvals *Service
	// Fence is nil when Config.CheckWrite is.
	Fence tool.Guard
	// ReadFence is nil when Config.CheckRead is.
	ReadFence tool.Guard

	workspace string
	roots     []string
	sockets   []string
	reviewer  bool
}

// New builds the machinery from cfg; it fails only on invalid rules.
func New(cfg Config) (*Session, error) {
	s := &Session{Log: cfg.Log, Defaults: cfg.Defaults, Grants: NewGrants(), workspace: cfg.Workspace, roots: cfg.WritableRoots, sockets: cfg.UnixSockets}
	if len(cfg.Rules) > 0 {
		r, err := NewRules(cfg.Rules)
		if err != nil {
			return nil, err
		}
		s.Rules = r
	}
	s.Confiner = &BashConfiner{Sandbox: cfg.Sandbox, Log: cfg.Log, Defaults: cfg.Defaults,
		Workspace: cfg.Workspace, WritableRoots: cfg.WritableRoots, UnixSockets: cfg.UnixSockets, Reads: cfg.Reads, Protected: cfg.Protected, Grants: s.Grants, PlanMode: cfg.PlanMode}
	s.Escalation = &Escalation{Log: cfg.Log, Defaults: cfg.Defaults, Grants: s.Grants}
	s.Approvals = &Service{Log: cfg.Log, State: s.State, Human: cfg.Human}
	if cfg.Reviewer != nil {
		rev := *cfg.Reviewer
		if rev.Log == nil {
			rev.Log = cfg.Log
		}
		if rev.Fallback == nil {
			rev.Fallback = cfg.Human
		}
		s.Approvals.Reviewer = &rev
		s.reviewer = true
	}
	if cfg.CheckWrite != nil {
		s.Fence = WriteFence(cfg.CheckWrite, s.Confiner.Policy)
	}
	if cfg.CheckRead != nil {
		s.ReadFence = ReadFence(cfg.CheckRead, s.Confiner.Policy)
	}
	return s, nil
}

// State is the session's current permission state.
func (s *Session) State() State { return s.Defaults.Current(s.Log) }

// Install wires the machinery into a session's pipeline and runtime
// context: the rules and the escalation check as tools/pre-execute
// middleware (each consults the rest of the chain, so either's deny
// wins and their asks merge), the write and read fences as guards, the approval
// service, and the sandbox:policy and approval:policy sections. The bash
// tool is wired separately: bash.Options{Confine: s.Confiner.Confine}.
func (s *Session) Install(p *tool.Pipeline, rt *prompt.Runtime) {
	if s.Rules != nil {
		p.UsePreExecute(s.Rules.PreExecute)
	}
	p.UsePreExecute(s.Escalation.PreExecute)
	if s.Fence != nil {
		p.UseGuard(s.Fence)
	}
	if s.ReadFence != nil {
		p.UseGuard(s.ReadFence)
	}
	p.SetApprover(s.Approvals)
	if rt != nil {
		human := s.Approvals.Human != nil
		for _, sec := range RuntimeSections(RuntimeOptions{
			State: s.State, Workspace: s.workspaceText(), WritableRoots: s.roots, UnixSockets: s.sockets,
			Human: func() bool { return human }, Reviewer: s.reviewer, PlanMode: s.Confiner.PlanMode, Reads: s.Confiner.Reads,
		}) {
			rt.Add(sec)
		}
	}
}

// workspaceText names the workspace for the model.
func (s *Session) workspaceText() string {
	if s.workspace != "" {
		return s.workspace
	}
	return s.Log.Header().Cwd
}
