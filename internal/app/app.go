// Package app is dsh's composition root: it opens the state directory and
// store, composes the profile (built-in base, $DSH_HOME/config.yaml,
// --patch files), resolves the model route and wires an agent for a new
// or resumed session. cmd/dsh and the CLI only call into it.
package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/dsh-dev/dsh/internal/goal"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/compaction"
	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/config"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/projection"
	"github.com/dsh-dev/dsh/internal/prompt"
	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/sandbox"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
	"github.com/dsh-dev/dsh/internal/terminal"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/fs"
	toolsmcp "github.com/dsh-dev/dsh/internal/tools/mcp"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// Version is the dsh version string, set by the linker for releases.
var Version = "0.1.0-dev"

// UserAgent is sent to model providers.
func UserAgent() string { return "dsh/" + Version }

// DefaultPreset is the agent preset of new sessions.
const DefaultPreset = "standard"

// App is the opened state directory with its configuration and store.
type App struct {
	sbMu      sync.Mutex
	sandboxes map[string]*sandbox.Sandbox // guarded by sbMu; by backend order
	jobs      *jobHub
	// terms are the sessions' terminals (terminal_* tools).
	terms *terminal.Manager
	live  live

	subMu     sync.Mutex
	subagents *subagent.Service // guarded by subMu; created on first use
	manager   *subagent.Manager // guarded by subMu; continuable children

	codex codexState // the Codex provider, built on first use
	mcp   mcpState   // the profile's MCP servers, started on first use

	Home        string
	Config      config.Config
	Store       store.Store
	Catalog     *provider.Catalog
	Composition *compose.Composition

	// extraTools are Options.Tools, registered in every top-level session.
	extraTools []tool.Definition
}

// ConfigError marks errors in configuration or usage (exit code 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Options select extra configuration layers.
type Options struct {
	// Patches are --patch files applied after config.yaml, in order.
	Patches []string
	// Home, when set, is $DSH_HOME for this app (a program embedding dsh
	// names its own); "" reads $DSH_HOME, else ~/.dsh.
	Home string
	// Tools are extra tools (an embedding program's) registered in every
	// top-level session beside the profile's, run through the same
	// pipeline: permission rules, approvals, hooks and logging apply.
	Tools []tool.Definition
}

// Compose loads the configuration and composes the profile without
// opening the store (for dsh config dump).
func Compose(o Options) (string, config.Config, *compose.Composition, error) {
	home := o.Home
	var err error
	if home == "" {
		if home, err = config.Home(); err != nil {
			return "", config.Config{}, nil, &ConfigError{err}
		}
	} else if home, err = filepath.Abs(home); err != nil {
		return "", config.Config{}, nil, &ConfigError{err}
	}
	cfg, err := config.Load(home)
	if err != nil {
		return "", config.Config{}, nil, &ConfigError{err}
	}
	base := builtinRows()
	cfgPath := filepath.Join(home, "config.yaml")
	home2 := compose.Layer{Source: cfgPath, Rows: cfg.Profile}
	if cfg.Model != "" || cfg.Effort != "" || cfg.MaxTokens != 0 {
		// The top-level keys are shorthand for the "model" row.
		for _, r := range cfg.Profile {
			if r.ID == "model" {
				return "", cfg, nil, &ConfigError{fmt.Errorf("%s: set the model either with the top-level model/effort/max_tokens keys or with a profile row \"model\", not both", cfgPath)}
			}
		}
		var node yaml.Node
		if err := node.Encode(modelDefaults{Default: cfg.Model, Effort: cfg.Effort, MaxTokens: cfg.MaxTokens}); err != nil {
			return "", cfg, nil, err
		}
		if cfg.Model == "" {
			// Keep the built-in default model when only effort/max_tokens are set.
			_ = node.Encode(modelDefaults{Default: provider.DefaultModel, Effort: cfg.Effort, MaxTokens: cfg.MaxTokens})
		}
		home2.Rows = append([]compose.Row{{ID: "model", Module: "model", Config: node}}, home2.Rows...)
	}
	if len(cfg.MCPServers) > 0 {
		rows, err := mcpRows(cfg.MCPServers)
		if err != nil {
			return "", cfg, nil, err
		}
		// First in the layer, so a profile row with the same id wins.
		home2.Rows = append(rows, home2.Rows...)
	}
	layers := []compose.Layer{{Source: "built-in", Rows: base}, home2}
	for _, p := range o.Patches {
		l, err := compose.PatchFile(p)
		if err != nil {
			return "", cfg, nil, &ConfigError{err}
		}
		layers = append(layers, l)
	}
	comp, err := modules().Compose(layers...)
	if err != nil {
		return "", cfg, nil, &ConfigError{err}
	}
	return home, cfg, comp, nil
}

// Open composes the configuration and opens the embedded store
// $DSH_HOME/dsh.db, creating the directory as needed.
func Open(ctx context.Context, o Options) (*App, error) {
	// An existing store opens while the profile is composed: the two are
	// independent and each is a good part of the start-up. A new one is
	// created only once the configuration proved valid.
	early := openExistingStore(ctx)
	home, cfg, comp, err := Compose(o)
	if err != nil {
		if st, _ := early(); st != nil {
			st.Close()
		}
		return nil, err
	}
	st, err := early()
	if st == nil && err == nil {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", home, err)
		}
		st, err = sqlite.Open(ctx, filepath.Join(home, "dsh.db"))
	}
	if err != nil {
		return nil, err
	}
	return &App{Home: home, Config: cfg, Store: st, Catalog: provider.NewCatalog(cfg, nil), Composition: comp, jobs: newJobHub(), terms: terminal.New(terminal.Options{}),
		extraTools: append([]tool.Definition(nil), o.Tools...)}, nil
}

// openExistingStore starts opening $DSH_HOME/dsh.db on another goroutine
// when the file exists, and returns the function that waits for it: a
// nil store and nil error when it was not tried.
func openExistingStore(ctx context.Context) func() (*sqlite.Store, error) {
	home, err := config.Home()
	if err != nil {
		return func() (*sqlite.Store, error) { return nil, nil }
	}
	path := filepath.Join(home, "dsh.db")
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return func() (*sqlite.Store, error) { return nil, nil }
	}
	type opened struct {
		st  *sqlite.Store
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		st, err := sqlite.Open(ctx, path)
		ch <- opened{st, err}
	}()
	return sync.OnceValues(func() (*sqlite.Store, error) {
		o := <-ch
		return o.st, o.err
	})
}

// Close stops every continuable child and background job, then
// releases the store.
func (a *App) Close() error {
	if m := a.manager; m != nil {
		m.Close()
	}
	if a.jobs != nil {
		_ = a.jobs.reg.Close()
	}
	if a.terms != nil {
		a.terms.Shutdown()
	}
	a.closeMCP()
	return a.Store.Close()
}

// SessionOptions selects the session an agent runs.
type SessionOptions struct {
	// Model is "provider/model"; empty uses the profile's model row.
	Model  string
	Effort string
	// Cwd is the session working directory for a new session.
	Cwd string
	// Preset is the agent preset of a new session (default "standard").
	// A resumed session keeps its own; naming another one is an error.
	Preset string
	// ResumeID resumes that session (a unique id prefix is enough; one
	// that matches no session or several fails with a *store.IDError);
	// Continue resumes the newest session whose cwd is Cwd.
	ResumeID string
	Continue bool
	// Permission selects a permission preset (logged); "" keeps the
	// session's (or the default).
	Permission string
	// Approval overrides the approval policy ("ask" or "never").
	Approval string
	// Human answers approval asks; nil when no one can answer.
	Human permission.Answerer
	// Asker answers ask_user_question and exit_plan_mode; nil when no one
	// can (the calls fail at once with QUESTION_UNAVAILABLE).
	Asker question.Asker
	// Holder says what holds the session's lease while it is open ("dsh
	// run"), for the message a second process gets; "" means "dsh".
	Holder string
	// Origin and OriginInfo go into a new session's header (automated
	// sessions: "schedule", "github").
	Origin     string
	OriginInfo *session.OriginInfo
	// MCPServers are MCP servers for this session only, beside the
	// profile's (e.g. the mcpServers an ACP client sends in session/new):
	// started when the session is wired, stopped by Session.Close.
	MCPServers []mcp.ServerConfig
	// Restrictions, when not empty, are logged (permission/restrictions)
	// before a new session is wired and hold for its life: confined
	// reads, a strict command environment, a tool allow-list.
	Restrictions permission.Restrictions
}

// Session is a wired agent over a live session log.
type Session struct {
	Agent *agent.Agent
	Log   *session.Log
	Route provider.Resolved
	// System is the rendered system prompt.
	System string
	// Compactor is the session's compactor (nil when the compaction row
	// is disabled).
	Compactor *compaction.Compactor
	// Projections fold the log into todos, token usage and context
	// pressure, incrementally.
	Projections *projection.Projections

	jobs  *jobHub
	terms *terminal.Manager
	// closers stop what the session's rows started (persistent shells,
	// language servers).
	closers []func()
	live    *live
	manager *subagent.Manager
	// titler is the session-title call, nil without a title model.
	titler *titler
	// lease is the session lease this process holds (nil for children,
	// which their parent's process writes).
	lease store.Lease
	// hooks are the session's user hooks (nil: none configured).
	hooks *sessionHooks
	// mcpBridge keeps the registry in step with the MCP servers;
	// mcpOwn are the session's own servers (SessionOptions.MCPServers).
	mcpBridge *toolsmcp.Bridge
	mcpOwn    *mcp.Manager
	// plan is the session's plan mode (nil when the plan-mode row is
	// disabled).
	plan *question.Mode
	// Goals is the session's goal keeper: the goal tools, the host's
	// round driver and its goal commands change the goal through it.
	Goals *goal.Keeper
	// sandbox is the session's sandbox server (nil without a
	// permissions row).
	sandbox *sandbox.Session
}

func (a *App) modelDefaults() modelDefaults {
	for _, e := range a.Composition.Entries {
		if m, ok := e.Value.(modelDefaults); ok {
			return m
		}
	}
	return modelDefaults{Default: provider.DefaultModel}
}

func (a *App) presets() map[string]presetDef {
	out := map[string]presetDef{}
	for _, e := range a.Composition.Entries {
		if p, ok := e.Value.(presetDef); ok {
			out[p.Name] = p
		}
	}
	return out
}

// OpenSession creates or resumes a session and wires its agent.
func (a *App) OpenSession(ctx context.Context, o SessionOptions) (*Session, error) {
	route, effort, err := a.route(o.Model, o.Effort)
	if err != nil {
		return nil, err
	}
	log, leased, err := a.openLog(ctx, o)
	if err != nil {
		return nil, err
	}
	s, err := a.wire(ctx, log, route, effort, wiring{
		human: o.Human, asker: o.Asker, permPreset: o.Permission, approval: o.Approval, extraTools: a.extraTools, mcpServers: o.MCPServers,
		restrict: o.Restrictions,
	})
	// A new session is stored and leased while it is wired.
	lease, lerr := leased()
	switch {
	case lerr != nil:
		if s != nil {
			s.Close() // without a lease it only undoes the wiring
		}
		return nil, lerr
	case err != nil:
		return nil, errors.Join(err, lease.Release(context.WithoutCancel(ctx)))
	}
	s.lease = lease
	return s, nil
}

// route resolves a model spec and effort against the profile defaults.
func (a *App) route(model, effortName string) (provider.Resolved, llm.Effort, error) {
	md := a.modelDefaults()
	if model == "" {
		model = md.Default
	}
	route, err := a.Catalog.Resolve(model, UserAgent())
	if err != nil {
		return provider.Resolved{}, "", &ConfigError{err}
	}
	if effortName == "" {
		effortName = md.Effort
	}
	effort, err := llm.ParseEffort(effortName)
	if err != nil {
		return provider.Resolved{}, "", &ConfigError{err}
	}
	return route, effort, nil
}

// wiring carries per-session choices into wire.
type wiring struct {
	human                permission.Answerer
	asker                question.Asker
	permPreset, approval string
	// allow and deny filter the preset's tools (subagent children).
	allow, deny []string
	// extraTools are registered in addition to the preset's (e.g. a
	// child's structured_output tool).
	extraTools []tool.Definition
	// persona is an extra system prompt section (subagent children).
	persona string
	// mcpServers are the session's own MCP servers.
	mcpServers []mcp.ServerConfig
	// restrict are restrictions to log before wiring (a new session's).
	restrict permission.Restrictions
}

// wire builds the agent for an opened log from the composed profile.
func (a *App) wire(ctx context.Context, log *session.Log, route provider.Resolved, effort llm.Effort, w wiring) (*Session, error) {
	md := a.modelDefaults()
	h := log.Header()
	preset, ok := a.presets()[h.AgentPreset]
	if !ok {
		return nil, &ConfigError{fmt.Errorf("unknown agent preset %q", h.AgentPreset)}
	}

	e := &env{
		home: a.Home, cwd: h.Cwd, preset: preset.Name, log: log, route: route,
		reg: tool.NewRegistry(), prompt: prompt.NewAssembler(), runtime: &prompt.Runtime{},
		hooks: &agent.Hooks{}, tools: map[string]bool{}, tracker: fs.NewTracker(),
		app: a, human: w.human, asker: w.asker, permPreset: w.permPreset, approval: w.approval, declined: map[string]bool{},
		warn:   func(format string, args ...any) { fmt.Fprintf(os.Stderr, "dsh: "+format+"\n", args...) },
		effort: string(effort), bashMode: preset.Bash, goals: goal.NewKeeper(log),
	}
	e.pipe = tool.NewPipeline(e.reg)
	closersOwned := false
	defer func() {
		if !closersOwned {
			runClosers(e.closers)
		}
	}()
	for _, t := range preset.Tools {
		e.tools[t] = true
	}
	if len(w.allow) > 0 {
		allowed := map[string]bool{}
		for _, t := range w.allow {
			allowed[t] = e.tools[t]
		}
		e.tools = allowed
	}
	for _, t := range w.deny {
		delete(e.tools, t)
	}
	// Whether the log held events before this wiring (the restrictions
	// below are appended to a new one).
	resumed := log.Len() > 0
	if err := permission.Restrict(log, w.restrict); err != nil {
		return nil, err
	}
	restrict, err := permission.CurrentRestrictions(log)
	if err != nil {
		return nil, err
	}
	e.restrict = restrict
	if len(restrict.Tools) > 0 {
		for t := range e.tools {
			if !slices.Contains(restrict.Tools, t) {
				delete(e.tools, t)
			}
		}
	}
	var ag *agent.Agent
	e.inject = func(m llm.Message) error {
		if ag == nil {
			return errors.New("agent not started")
		}
		return ag.Inject(m)
	}
	e.steer = func(m llm.Message) error {
		if ag == nil {
			return errors.New("agent not started")
		}
		return ag.Steer(m)
	}
	e.cancelTurn = func() {
		if ag != nil {
			_ = ag.Cancel("hook", true)
		}
	}
	if w.permPreset != "" {
		if _, ok := permission.LookupPreset(w.permPreset); !ok {
			return nil, &ConfigError{fmt.Errorf("unknown permission preset %q (want read-only, workspace-write, auto or full-access)", w.permPreset)}
		}
	}
	if w.approval != "" {
		if _, err := permission.ParseApproval(w.approval); err != nil {
			return nil, &ConfigError{err}
		}
	}
	// User hooks attach first: their pre-step runs after compaction's (which
	// puts itself first) and their pre-execute before the permission rules.
	userHooks, err := e.installHooks(ctx, resumed)
	if err != nil {
		return nil, err
	}
	hooksDone := false
	defer func() {
		if !hooksDone {
			userHooks.abort() // the wiring failed: no session to end
		}
	}()
	// Early plugins (permissions, web) set up what tool rows build on.
	for _, early := range []bool{true, false} {
		for _, entry := range a.Composition.Entries {
			p, ok := entry.Value.(plugin)
			if !ok {
				continue
			}
			if _, isEarly := p.(interface{ early() }); isEarly != early {
				continue
			}
			if err := p.apply(e); err != nil {
				return nil, &ConfigError{fmt.Errorf("profile row %q (%s): %w", entry.ID, entry.Source, err)}
			}
		}
	}
	for _, def := range w.extraTools {
		if err := e.reg.Register("", def); err != nil {
			return nil, err
		}
	}
	if w.persona != "" {
		if err := e.prompt.Add(prompt.Section{Name: "persona:delegated", Order: 50, Text: w.persona, Literal: true}); err != nil {
			return nil, err
		}
	}
	// MCP tools follow a child's tool filter like the preset's tools: an
	// allow-list offers only what it names, a deny-list removes.
	offer := func(name string) bool {
		return (len(w.allow) == 0 || slices.Contains(w.allow, name)) && !slices.Contains(w.deny, name) &&
			(len(restrict.Tools) == 0 || slices.Contains(restrict.Tools, name))
	}
	mcpOwn, mcpBridge, err := a.wireMCP(ctx, e, w.mcpServers, offer)
	if err != nil {
		return nil, err
	}
	wired := false
	defer func() {
		if !wired {
			if mcpBridge != nil {
				mcpBridge.Close()
			}
			mcpOwn.Close()
		}
	}()
	for name := range e.tools {
		if e.declined[name] {
			continue
		}
		if _, ok := e.reg.Lookup("", name); !ok {
			return nil, &ConfigError{fmt.Errorf("agent preset %s names tool %q, but no enabled profile row provides it", preset.Name, name)}
		}
	}
	if _, ok := e.reg.Lookup("", goal.ToolUpdate); !ok {
		e.goals.NoTools() // round messages must not ask for a tool it lacks
	}
	system, err := e.prompt.Render(preset.Name, map[string]string{
		"cwd": h.Cwd, "model": route.Provider + "/" + route.Model.ID, "provider": route.Provider,
		"preset": preset.Name, "os": runtime.GOOS, "home": a.Home,
	})
	if err != nil {
		return nil, &ConfigError{err}
	}
	// The runtime-context snapshot enters after every other pre-step input.
	e.hooks.PreStep = append(e.hooks.PreStep, func(_ context.Context, in agent.PreStep) ([]llm.Message, bool, error) {
		if m, ok := e.runtime.Message(log, newMessageID); ok {
			return append(in.Messages, m), false, nil
		}
		return in.Messages, false, nil
	})
	maxTokens := md.MaxTokens
	ag, err = agent.New(agent.Config{
		Log:      log,
		Route:    agent.Route{Provider: route.Provider, Model: route.Model, Adapter: route.Adapter, Retry: llm.DefaultRetryPolicy(), Effort: effort, MaxTokens: maxTokens},
		Tools:    e.reg,
		Pipeline: e.pipe,
		System:   system,
		Hooks:    *e.hooks,
	})
	if err != nil {
		return nil, err
	}
	if e.plan != nil {
		e.plan.SetBusy(ag.Busy)
	}
	// A new session is being stored meanwhile (pendingLease): the first
	// request's header is encoded now rather than on its way.
	ag.PrepareHeader()
	proj, err := sessionProjections(log.Header(), int64(route.Model.ContextWindow))
	if err != nil {
		return nil, err
	}
	for _, m := range contextMessages(e.pendingContext) {
		if err := ag.Inject(m); err != nil {
			return nil, err
		}
	}
	a.jobs.attach(log.ID(), ag)
	a.live.add(log)
	wired, hooksDone, closersOwned = true, true, true
	return &Session{Agent: ag, Log: log, Route: route, System: system, Compactor: e.compactor, Projections: proj.Attach(log), jobs: a.jobs, terms: a.terms, closers: e.closers, live: &a.live, manager: a.manager, titler: e.titler,
		mcpBridge: mcpBridge, mcpOwn: mcpOwn, hooks: userHooks, plan: e.plan, Goals: e.goals, sandbox: e.sandbox}, nil
}

// sessionProjections is the registry every session's log is attached to.
// Its units all list their types (TestSessionProjectionsAreTyped), so the
// first fold of a resumed log reads back none of the payloads it left in
// the store.
func sessionProjections(h session.Header, contextWindow int64) (*projection.Registry, error) {
	proj := projection.NewRegistry()
	if err := projection.RegisterBuiltins(proj, contextWindow); err != nil {
		return nil, err
	}
	if err := proj.Register(catalog.Unit(h)); err != nil {
		return nil, err
	}
	return proj, nil
}

func newMessageID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// openLog creates a new session or loads (and repairs) one to resume,
// holding its lease: a session another live process holds fails with a
// *store.BusyError, and one whose holder was killed is taken over and
// repaired. The lease comes from the returned function, which waits for
// it (a new session is created and leased on another goroutine; see
// pendingLease); the caller releases it.
func (a *App) openLog(ctx context.Context, o SessionOptions) (*session.Log, func() (store.Lease, error), error) {
	holder := o.Holder
	if holder == "" {
		holder = "dsh"
	}
	id := o.ResumeID
	if id != "" {
		// An id may be abbreviated to any prefix only one session has.
		full, err := a.Store.Resolve(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		id = full
	}
	if o.Continue && id == "" {
		cwd, err := resolveCwd(o.Cwd)
		if err != nil {
			return nil, nil, err
		}
		if id, err = a.latestSession(ctx, cwd); err != nil {
			return nil, nil, err
		}
	}
	if id != "" {
		lease, err := a.Store.Acquire(ctx, id, holder)
		if err != nil {
			var busy *store.BusyError
			if errors.As(err, &busy) {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("resume %s: %w", id, err)
		}
		log, err := a.resumeLog(ctx, o, lease)
		if err != nil {
			return nil, nil, errors.Join(err, lease.Release(context.WithoutCancel(ctx)))
		}
		return log, func() (store.Lease, error) { return lease, nil }, nil
	}
	cwd, err := resolveCwd(o.Cwd)
	if err != nil {
		return nil, nil, err
	}
	preset := o.Preset
	if preset == "" {
		preset = DefaultPreset
	}
	if _, ok := a.presets()[preset]; !ok {
		return nil, nil, &ConfigError{fmt.Errorf("unknown agent preset %q", preset)}
	}
	sid, err := uuid.NewV7()
	if err != nil {
		return nil, nil, err
	}
	h := session.Header{Version: session.FormatVersion, ID: sid.String(), CreatedAt: time.Now().UnixMilli(), Cwd: cwd, AgentPreset: preset,
		Origin: o.Origin, OriginInfo: o.OriginInfo}
	p := startPendingLease(ctx, a.Store, h, holder)
	log, err := session.NewLog(h, nil, p)
	if err != nil {
		return nil, nil, errors.Join(err, p.release(context.WithoutCancel(ctx)))
	}
	// A long run releases durable payloads and reads them back from the
	// store (see session.Releasable); a subagent child's log does not.
	log.SetSource(a.Store)
	return log, p.wait, nil
}

// resumeLog loads and repairs a leased session and opens its live log.
func (a *App) resumeLog(ctx context.Context, o SessionOptions, lease store.Lease) (*session.Log, error) {
	id := lease.SessionID()
	if prev, took := lease.TookOverFrom(); took {
		fmt.Fprintf(os.Stderr, "dsh: session %s was left by %s (pid %d on %s), which stopped without releasing it; taking it over\n", id, prev.Label, prev.PID, prev.Host)
	}
	h, events, err := lease.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", id, err)
	}
	if h.AgentPreset == "" {
		h.AgentPreset = DefaultPreset
	}
	if o.Preset != "" && o.Preset != h.AgentPreset {
		return nil, &ConfigError{fmt.Errorf("session %s uses agent preset %s; a resumed session keeps its preset", id, h.AgentPreset)}
	}
	endSeeded := len(events) > 0 && events[len(events)-1].Type == session.TypeEndSeed
	log, err := session.NewLogOwning(h, events, lease)
	if err != nil {
		return nil, err
	}
	log.SetSource(a.Store)
	// session/end-seed is the first live write of a resumed session,
	// before anything the wiring appends.
	if len(events) > 0 && !endSeeded {
		if _, err := log.Append(session.TypeEndSeed, struct{}{}); err != nil {
			return nil, err
		}
	}
	return log, nil
}

func resolveCwd(cwd string) (string, error) {
	var err error
	if cwd == "" {
		if cwd, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	if cwd, err = filepath.Abs(cwd); err != nil {
		return "", &ConfigError{err}
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return "", &ConfigError{fmt.Errorf("working directory %s is not a directory", cwd)}
	}
	return cwd, nil
}

// ErrNoSession is returned by --continue when no session matches.
var ErrNoSession = errors.New("no session to continue in this directory")

// LatestSession returns the id of the newest top-level session whose cwd
// is cwd ("" = the current directory), as --continue picks it; none is a
// *ConfigError wrapping ErrNoSession.
func (a *App) LatestSession(ctx context.Context, cwd string) (string, error) {
	dir, err := resolveCwd(cwd)
	if err != nil {
		return "", err
	}
	return a.latestSession(ctx, dir)
}

func (a *App) latestSession(ctx context.Context, cwd string) (string, error) {
	// Newest first, a page at a time: the first readable one is nearly
	// always on the first page, however many sessions the directory has.
	f := store.ListFilter{Cwd: cwd, TopLevelOnly: true, Limit: 16}
	for {
		entries, err := a.Store.List(ctx, f)
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			if e.Err == nil && e.Header.Cwd == cwd && e.Header.ParentSession == "" {
				return e.Header.ID, nil
			}
		}
		if len(entries) < f.Limit {
			return "", &ConfigError{ErrNoSession}
		}
		c := store.CursorOf(entries[len(entries)-1])
		f.Before = &c
	}
}
