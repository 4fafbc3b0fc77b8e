package app

import (
	"errors"

	"go.yaml.in/yaml/v4"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

// planModeDef is the value of the "plan-mode" module: the session's plan
// mode (state folded from plan/mode events, writing tools refused while
// it is on, the plan:policy runtime-context section, changes applied at
// step boundaries). Allow names further tools that may run in plan mode
// (the built-in set is the read-only tools).
type planModeDef struct {
	Allow []string `yaml:"allow,omitempty"`
}

// early: the exit_plan_mode row and the permission layer's read-only
// clamp use the mode the row creates.
func (d planModeDef) early() {}

func (d planModeDef) apply(e *env) error {
	m := question.NewMode(e.log, d.Allow)
	e.plan = m
	e.pipe.UsePreExecute(m.PreExecute)
	e.hooks.PreStep = append(e.hooks.PreStep, m.PreStep)
	e.runtime.Add(m.RuntimeSection())
	return nil
}

// ErrNoPlanMode is what SetPlanMode returns when the profile's plan-mode
// row is disabled.
var ErrNoPlanMode = &ConfigError{errors.New("plan mode is not enabled in this profile (the plan-mode row is disabled)")}

// PlanMode reports whether the session is in plan mode (as logged).
func (s *Session) PlanMode() bool { return s.plan != nil && s.plan.Active() }

// SetPlanMode turns plan mode on or off: logged now when no turn runs,
// else at the next step boundary (or when the run ends).
func (s *Session) SetPlanMode(active bool, source string) error {
	if s.plan == nil {
		if !active {
			return nil
		}
		return ErrNoPlanMode
	}
	return s.plan.Set(active, source)
}

// SettlePlanMode logs a plan-mode change still waiting for a step
// boundary; the host calls it when a run ends.
func (s *Session) SettlePlanMode() error {
	if s.plan == nil {
		return nil
	}
	return s.plan.Settle()
}

func registerQuestionModules(must func(compose.Module)) {
	must(compose.Module{Name: "plan-mode", Doc: "plan mode: writing tools refused until the user approves a plan", Decode: func(n *yaml.Node) (any, error) {
		return compose.Decode(n, planModeDef{})
	}})
	must(toolModule("tool/ask_user_question", question.AskName, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return question.NewAsk(question.Options{Asker: e.asker}), nil
	}))
	must(toolModule("tool/exit_plan_mode", question.ExitName, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		if e.plan == nil {
			return tool.Definition{}, errUnavailable
		}
		return question.NewExit(e.plan, question.Options{Asker: e.asker}), nil
	}))
}
