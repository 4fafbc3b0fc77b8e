package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/agent"
	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/permission"
	"github.com/dsh-dev/dsh/internal/provider"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
	"github.com/dsh-dev/dsh/internal/tool"
)

// subagentsDef is the value of the "subagents" module: the delegation
// service and its in-process spawn and fork providers.
type subagentsDef struct {
	// MaxDepth caps delegation depth (0 forbids delegation).
	MaxDepth int `yaml:"max_depth"`
	// ModelSelection lets the model pick provider, model and effort for
	// spawned children.
	ModelSelection bool `yaml:"model_selection,omitempty"`
	// Mode of the subagent and subagent_fork tools: "continuable" (the
	// default: the call returns the child's id at once, its answer comes
	// as a settle notice, send_message continues it) or "one-shot" (the
	// call returns the answer; run_in_background makes it a job).
	Mode string `yaml:"mode"`
}

func (d subagentsDef) early() {}

func (d subagentsDef) apply(e *env) error {
	svc, err := e.app.subagentService(d, e.permDefault)
	if err != nil {
		return err
	}
	e.subagents = svc
	e.modelSelection = d.ModelSelection
	e.subagentMode = d.Mode
	return nil
}

// live tracks the logs of the sessions this process runs (roots and
// children), so delegation tools find their caller's log.
type live struct {
	mu   sync.Mutex
	logs map[string]*session.Log // guarded by mu
}

func (l *live) add(log *session.Log) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logs == nil {
		l.logs = map[string]*session.Log{}
	}
	l.logs[log.ID()] = log
}

// Log implements catalog.Live.
func (l *live) Log(id string) (*session.Log, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	log, ok := l.logs[id]
	return log, ok
}

func (l *live) remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.logs, id)
}

func (l *live) resolve(c *tool.Call) (*session.Log, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if log := l.logs[c.SessionID]; log != nil {
		return log, nil
	}
	return nil, fmt.Errorf("session %s is not live in this process", c.SessionID)
}

// subagentService returns the process-wide delegation service.
func (a *App) subagentService(d subagentsDef, permDefault string) (*subagent.Service, error) {
	a.subMu.Lock()
	defer a.subMu.Unlock()
	if a.subagents != nil {
		return a.subagents, nil
	}
	depth := d.MaxDepth
	svc, err := subagent.NewService(subagent.Options{MaxDepth: &depth, PermissionDefaults: permission.Defaults{Preset: permDefault}})
	if err != nil {
		return nil, err
	}
	f := &childFactory{app: a}
	if err := svc.Register(subagent.Spawn(f)); err != nil {
		return nil, err
	}
	if err := svc.Register(subagent.Fork(f)); err != nil {
		return nil, err
	}
	m, err := subagent.NewManager(subagent.ManagerOptions{
		Service: svc, Factory: f, Deliver: a.deliver,
		ResolveLog: func(id string) (*session.Log, error) {
			if log, ok := a.live.Log(id); ok {
				return log, nil
			}
			return nil, fmt.Errorf("session %s is not live in this process", id)
		},
	})
	if err != nil {
		return nil, err
	}
	a.subagents, a.manager = svc, m
	return svc, nil
}

// deliver hands a manager notice or message to a top-level session's
// agent: wake steers it (an idle agent then runs a turn), otherwise the
// message waits for its next step.
func (a *App) deliver(parentID string, msg llm.Message, wake bool) error {
	a.jobs.mu.Lock()
	ag := a.jobs.agents[parentID]
	a.jobs.mu.Unlock()
	if ag == nil {
		return fmt.Errorf("session %s is not live in this process", parentID)
	}
	if wake {
		return ag.Steer(msg)
	}
	return ag.Inject(msg)
}

// ResumeChild implements subagent.ResumeFactory: a cold child is rebuilt
// from its stored log and its continuable descriptor.
func (f *childFactory) ResumeChild(ctx context.Context, id string) (subagent.Child, error) {
	a := f.app
	h, events, err := a.Store.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	endSeeded := len(events) > 0 && events[len(events)-1].Type == session.TypeEndSeed
	log, err := session.NewLogOwning(h, events, a.Store)
	if err != nil {
		return nil, err
	}
	if len(events) > 0 && !endSeeded {
		if _, err := log.Append(session.TypeEndSeed, struct{}{}); err != nil {
			return nil, err
		}
	}
	desc, _ := subagent.ReadDescriptor(log)
	spec := subagent.ChildSpec{Provider: desc.AgentProvider, Model: desc.AgentModel, Effort: desc.AgentEffort}
	if h.ParentSession != "" {
		if parent, ok := a.live.Log(h.ParentSession); ok {
			spec.Parent = parent
		}
	}
	var route routeChoice
	if spec.Parent != nil {
		if route, err = f.route(spec); err != nil {
			return nil, err
		}
	} else {
		pr := a.routeOf(log)
		r, e, err := a.route(pr.provider+"/"+pr.model, string(pr.effort))
		if err != nil {
			return nil, err
		}
		route = routeChoice{r: r, effort: e}
	}
	w := wiring{persona: desc.Persona}
	if desc.ToolFilter != nil {
		w.allow, w.deny = desc.ToolFilter.Allow, desc.ToolFilter.Deny
	}
	sess, err := a.wire(ctx, log, route.r, route.effort, w)
	if err != nil {
		return nil, err
	}
	return &child{sess: sess, app: a}, nil
}

// Drain waits until every continuable descendant of the session has
// settled (their settle notices are delivered to it as they do).
func (s *Session) Drain(ctx context.Context) error {
	if s.manager == nil {
		return nil
	}
	return s.manager.Drain(ctx, s.Log.ID())
}

// StopChildren cancels the work of every continuable descendant of the
// session and waits until they have settled (see subagent.Manager.Stop).
func (s *Session) StopChildren(ctx context.Context) error {
	if s.manager == nil {
		return nil
	}
	return s.manager.Stop(ctx, s.Log.ID())
}

// childFactory builds in-process subagent children from the same
// composed profile as their parent.
type childFactory struct{ app *App }

type child struct {
	sess *Session
	app  *App
	once sync.Once
}

func (c *child) ID() string          { return c.sess.Log.ID() }
func (c *child) Log() *session.Log   { return c.sess.Log }
func (c *child) Agent() *agent.Agent { return c.sess.Agent }
func (c *child) Close() (err error) {
	c.once.Do(func() {
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = c.sess.Log.Flush(fctx)
		c.sess.Close()
	})
	return err
}

// NewChild implements subagent.Factory.
func (f *childFactory) NewChild(ctx context.Context, spec subagent.ChildSpec) (subagent.Child, error) {
	a := f.app
	route, err := f.route(spec)
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	// The header, the stored seed and the end-seed marker as the
	// subagent package requires (it checks what NewChild returns).
	log, err := subagent.NewChildLog(ctx, a.Store, spec, id.String())
	if err != nil {
		return nil, err
	}
	if err := subagent.ApplyPermission(log, spec.Permission); err != nil {
		return nil, err
	}
	// A child is held to its parent's restrictions (a review's subagent
	// reads no more than the review).
	var restrict permission.Restrictions
	if spec.Parent != nil {
		if restrict, err = permission.CurrentRestrictions(spec.Parent); err != nil {
			return nil, err
		}
	}
	sess, err := a.wire(ctx, log, route.r, route.effort, wiring{
		allow: spec.Tools.Allow, deny: spec.Tools.Deny, extraTools: spec.ExtraTools, persona: spec.Persona,
		restrict: restrict,
	})
	if err != nil {
		return nil, err
	}
	return &child{sess: sess, app: a}, nil
}

// routeChoice is a resolved model route with its effort.
type routeChoice struct {
	r      provider.Resolved
	effort llm.Effort
}

// route picks the child's model: "" fields are the parent's.
func (f *childFactory) route(spec subagent.ChildSpec) (routeChoice, error) {
	parent := f.app.routeOf(spec.Parent)
	prov, model := spec.Provider, spec.Model
	if prov == "" {
		prov = parent.provider
	}
	if model == "" && prov == parent.provider {
		model = parent.model
	}
	specStr := prov
	if model != "" {
		specStr += "/" + model
	}
	effort := spec.Effort
	if effort == "" {
		effort = string(parent.effort)
	}
	r, e, err := f.app.route(specStr, effort)
	if err != nil {
		return routeChoice{}, err
	}
	return routeChoice{r: r, effort: e}, nil
}

// parentRoute is the route a session last used, from its log.
type parentRoute struct {
	provider, model string
	effort          llm.Effort
}

// routeOf reads a session's current route from its latest request/header
// (the log is the truth), falling back to the profile's model.
func (a *App) routeOf(log *session.Log) parentRoute {
	var rh session.RequestHeader
	if e, ok := log.Latest(session.TypeRequestHeader); ok && e.Decode(&rh) == nil {
		c := rh.Header.Config
		return parentRoute{provider: c.Provider, model: c.Model, effort: c.Effort}
	}
	md := a.modelDefaults()
	prov, model, _ := strings.Cut(md.Default, "/")
	return parentRoute{provider: prov, model: model, effort: llm.Effort(md.Effort)}
}

func registerSubagentModules(must func(compose.Module)) {
	must(compose.Module{Name: "subagents", Doc: "in-process subagents (spawn, fork)", Decode: func(n *yaml.Node) (any, error) {
		d, err := compose.Decode(n, subagentsDef{MaxDepth: subagent.DefaultMaxDepth, Mode: subagent.ModeContinuable})
		if err == nil && d.MaxDepth < 0 {
			err = fmt.Errorf("max_depth must be 0 or more")
		}
		if err == nil && d.Mode != subagent.ModeContinuable && d.Mode != subagent.ModeOneShot {
			err = fmt.Errorf("mode must be continuable or one-shot")
		}
		return d, err
	}})
	delegation := func(module, name, provider string) {
		must(toolModule(module, name, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
			if e.subagents == nil {
				return tool.Definition{}, errUnavailable
			}
			if e.subagentMode != subagent.ModeOneShot {
				return e.app.manager.Tool(name, provider, e.app.live.resolve), nil
			}
			return subagent.NewTool(subagent.ToolOptions{
				Service: e.subagents, Provider: provider, Name: name, ResolveLog: e.app.live.resolve,
				ModelSelection: e.modelSelection && provider == "spawn", Jobs: e.app.jobs.reg,
			})
		}))
	}
	control := func(module, name string, build func(m *subagent.Manager) tool.Definition) {
		must(toolModule(module, name, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
			if e.subagents == nil || e.subagentMode == subagent.ModeOneShot {
				return tool.Definition{}, errUnavailable
			}
			return build(e.app.manager), nil
		}))
	}
	control("tool/send_message", subagent.ToolSendMessage, (*subagent.Manager).SendMessageTool)
	control("tool/interrupt_agent", subagent.ToolInterruptAgent, (*subagent.Manager).InterruptTool)
	delegation("tool/subagent", subagent.ToolSubagent, "spawn")
	delegation("tool/subagent_fork", subagent.ToolSubagentFork, "fork")
	must(toolModule("tool/list_agents", catalog.ToolListAgents, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return catalog.NewListAgentsTool(e.app.CatalogDeps(), func(c *tool.Call) string { return c.SessionID }), nil
	}))
	must(toolModule("tool/list_subagent_models", "list_subagent_models", struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		if e.subagents == nil {
			return tool.Definition{}, errUnavailable
		}
		return subagent.NewListModelsTool(e.app.subagentModels), nil
	}))
}

// subagentModels lists the catalog for list_subagent_models.
func (a *App) subagentModels() []subagent.ProviderModels {
	var out []subagent.ProviderModels
	for _, p := range a.Catalog.Providers() {
		pm := subagent.ProviderModels{Provider: p.ID}
		for _, m := range p.Models {
			pm.Models = append(pm.Models, subagent.ModelInfo{ID: m.ID, Efforts: m.Efforts, ContextWindow: m.ContextWindow})
		}
		out = append(out, pm)
	}
	return out
}

// liveView answers catalog.Live from the process's live sessions: a
// session is running while its agent runs a turn.
type liveView struct{ a *App }

func (v liveView) Log(id string) (*session.Log, bool) { return v.a.live.Log(id) }

func (v liveView) Running(id string) bool {
	v.a.jobs.mu.Lock()
	ag := v.a.jobs.agents[id]
	v.a.jobs.mu.Unlock()
	return ag != nil && ag.Busy()
}

// CatalogDeps returns what subagent listing reads: the store, and the
// live sessions of this process (preferred over stored copies).
func (a *App) CatalogDeps() catalog.Deps {
	return catalog.Deps{Store: a.Store, Live: liveView{a}}
}

// SubagentService returns the delegation service once a session with the
// subagents row has been wired (nil before).
func (a *App) SubagentService() *subagent.Service {
	a.subMu.Lock()
	defer a.subMu.Unlock()
	return a.subagents
}
