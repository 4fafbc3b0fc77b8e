package app

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/bash"
	webtool "github.com/dsh-dev/dsh/internal/tools/web"
	"github.com/dsh-dev/dsh/internal/web"
)

// permissionsDef is the value of the "permissions" module: sandbox mode
// and approval policy defaults, rules, the auto reviewer's model.
type permissionsDef struct {
	// Default is the permission preset of sessions that chose none.
	Default string `yaml:"default"`
	// Rules are tools/pre-execute rules (allow/ask/deny by tool and, for
	// bash, command prefix), evaluated deny > ask > allow.
	Rules []permission.Rule `yaml:"rules,omitempty"`
	// ReviewModel is "provider/model" for the auto reviewer; empty uses
	// the session's model.
	ReviewModel string `yaml:"review_model,omitempty"`
	// WritableRoots are extra writable directories in workspace-write.
	WritableRoots []string `yaml:"writable_roots,omitempty"`
	// Backends orders the sandbox backends to try (bwrap, landlock).
	Backends []string `yaml:"backends,omitempty"`
	// UnixSockets are pathname UNIX sockets (or directories of them)
	// outside the workspace that confined commands may connect to, e.g.
	// an ssh-agent or a database socket; all others are refused.
	UnixSockets []string `yaml:"unix_sockets,omitempty"`
	// Sandbox adjusts what confined commands and the file tools may
	// read, and what stays read-only (sandboxDef).
	Sandbox sandboxDef `yaml:"sandbox,omitempty"`
}

func decodePermissions(n *yaml.Node) (any, error) {
	d, err := compose.Decode(n, permissionsDef{Default: permission.DefaultPreset})
	if err != nil {
		return nil, err
	}
	if _, ok := permission.LookupPreset(d.Default); !ok {
		return nil, fmt.Errorf("unknown permission preset %q", d.Default)
	}
	if _, err := permission.NewRules(d.Rules); err != nil {
		return nil, err
	}
	if err := sandbox.ValidateUnixSockets(d.UnixSockets); err != nil {
		return nil, fmt.Errorf("unix_sockets: %w", err)
	}
	if err := d.Sandbox.validate(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	for _, b := range d.Backends {
		if b != "bwrap" && b != "landlock" {
			return nil, fmt.Errorf("unknown sandbox backend %q (want bwrap or landlock)", b)
		}
	}
	return d, nil
}

func (d permissionsDef) early() {}

func (d permissionsDef) apply(e *env) error {
	e.permDefault = d.Default
	// The process-wide sandbox (backend probed once), seen through this
	// session's server.
	sb := e.app.sandbox(d.Backends).Session()
	e.sandbox = sb
	roots := d.WritableRoots
	if roots == nil {
		// Build tools (go, npm, pip) write their caches under the user
		// cache directory; without it most test commands fail in
		// workspace-write. Set writable_roots: [] to fence it too.
		if dir, err := os.UserCacheDir(); err == nil {
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				roots = []string{dir}
			}
		}
	}
	reads, err := d.Sandbox.reads(e.home)
	if err != nil {
		return fmt.Errorf("permissions: sandbox: %w", err)
	}
	// A restricted session (a pull request review) confines its reads
	// whatever the configuration says.
	if e.restrict.ConfineReads {
		reads.ConfineReads = true
		reads.ReadRoots = append(reads.ReadRoots, e.restrict.ReadRoots...)
	}
	cfg := permission.Config{
		Reads:         reads,
		Log:           e.log,
		Defaults:      permission.Defaults{Preset: d.Default},
		Sandbox:       sb,
		CheckWrite:    sandbox.Policy.CheckWrite,
		CheckRead:     sandbox.Policy.CheckRead,
		Workspace:     e.cwd,
		WritableRoots: roots,
		UnixSockets:   d.UnixSockets,
		Rules:         d.Rules,
		// The scripts trusted hooks run stay read-only to the agent.
		Protected: func() []string { return e.app.ProtectedHookFiles(e.cwd) },
	}
	if e.human != nil {
		cfg.Human = e.human
	}
	// The plan-mode row may come later in the profile: read it per call.
	cfg.PlanMode = func() bool { return e.plan != nil && e.plan.Active() }
	reviewer := &permission.AutoReviewer{Adapter: e.route.Adapter, Model: e.route.Model.ID}
	if d.ReviewModel != "" {
		r, err := e.app.Catalog.Resolve(d.ReviewModel, UserAgent())
		if err != nil {
			return fmt.Errorf("review_model: %w", err)
		}
		reviewer = &permission.AutoReviewer{Adapter: r.Adapter, Model: r.Model.ID}
	}
	cfg.Reviewer = reviewer
	perm, err := permission.New(cfg)
	if err != nil {
		return err
	}
	if e.permPreset != "" {
		if err := cfg.Defaults.Select(e.log, e.permPreset, "user"); err != nil {
			return err
		}
	}
	if e.approval != "" && perm.State().Approval != e.approval {
		if _, err := e.log.Append(session.TypeApprovalPolicy, permission.ApprovalPolicy{Policy: e.approval, Source: "user"}); err != nil {
			return err
		}
	}
	perm.Install(e.pipe, e.runtime)
	e.perm = perm
	return nil
}

// bashConfine returns the bash tool's confinement option: through the
// permission layer when it is configured. Without a permissions row,
// commands run unconfined, which `dsh config dump` makes visible.
func (e *env) bashConfine() func(c *tool.Call, argv []string) (bash.Confinement, error) {
	if e.perm == nil {
		return nil
	}
	return e.perm.Confiner.Confine
}

// filePolicy returns the sandbox policy the file tools apply while they
// work (fs.Fence): the one the permission guards check before the call,
// so the check and the use are the same policy. Nil without a
// permissions row, like bashConfine.
func (e *env) filePolicy() func(c *tool.Call) sandbox.Policy {
	if e.perm == nil {
		return nil
	}
	return e.perm.Confiner.Policy
}

// sandbox returns the process-wide sandbox for a backend order.
func (a *App) sandbox(order []string) *sandbox.Sandbox {
	a.sbMu.Lock()
	defer a.sbMu.Unlock()
	if len(order) == 0 {
		// An operator override, e.g. to skip a misbehaving bwrap.
		if env := os.Getenv("DSH_SANDBOX_BACKENDS"); env != "" {
			order = strings.Split(env, ",")
		}
	}
	key := strings.Join(order, ",")
	if a.sandboxes == nil {
		a.sandboxes = map[string]*sandbox.Sandbox{}
	}
	if sb, ok := a.sandboxes[key]; ok {
		return sb
	}
	var sb *sandbox.Sandbox
	if len(order) == 0 {
		sb = sandbox.Default()
	} else {
		var bs []sandbox.Backend
		for _, name := range order {
			switch name {
			case "bwrap":
				bs = append(bs, sandbox.NewBwrap(""))
			case "landlock":
				bs = append(bs, sandbox.NewLandlock(""))
			}
		}
		sb = sandbox.New(bs...)
	}
	a.sandboxes[key] = sb
	return sb
}

// webDef is the value of the "web" module: the web runtime behind
// web_fetch and web_search.
type webDef struct {
	SearchProvider string `yaml:"search_provider,omitempty"`
	FetchProvider  string `yaml:"fetch_provider,omitempty"`
	// Allow lets fetches reach these private hosts (host or host:port),
	// for tests and intranets.
	Allow []string `yaml:"allow,omitempty"`
}

func (d webDef) early() {}

func (d webDef) apply(e *env) error {
	rt := web.NewRuntime(web.Config{SearchProvider: d.SearchProvider, FetchProvider: d.FetchProvider})
	if err := rt.RegisterFetch(web.NewHTTPFetcher(web.HTTPOptions{Policy: web.Policy{Allow: d.Allow}, UserAgent: UserAgent()})); err != nil {
		return err
	}
	if err := rt.RegisterSearch(web.NewDeepSeekSearch(web.DeepSeekOptions{UserAgent: UserAgent()})); err != nil {
		return err
	}
	e.web = rt
	return nil
}

// errUnavailable makes a tool row decline quietly: the tool is not
// offered in this session (e.g. web_search with no usable provider).
var errUnavailable = errors.New("tool unavailable")

func registerPermissionModules(must func(compose.Module)) {
	must(compose.Module{Name: "permissions", Doc: "sandbox, approvals, rules and auto review", Decode: decodePermissions})
	must(compose.Module{Name: "web", Doc: "web runtime: fetch with SSRF policy, search providers", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, webDef{})
	}})
	must(toolModule("tool/web_fetch", "web_fetch", webtool.Options{}, func(e *env, o webtool.Options) (tool.Definition, error) {
		if e.web == nil {
			return tool.Definition{}, errUnavailable
		}
		o.Web = e.web
		return webtool.NewFetch(o), nil
	}))
	must(toolModule("tool/web_search", "web_search", webtool.Options{}, func(e *env, o webtool.Options) (tool.Definition, error) {
		if e.web == nil {
			return tool.Definition{}, errUnavailable
		}
		if _, err := e.web.SearchProvider(); err != nil {
			return tool.Definition{}, errUnavailable
		}
		o.Web = e.web
		return webtool.NewSearch(o), nil
	}))
}
