package app

import (
	"time"

	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/goal"
	"github.com/dsh-dev/dsh/internal/ralph"
	"github.com/dsh-dev/dsh/internal/tool"
)

// ralphConfig is the user-facing configuration of the ralph tool.
type ralphConfig struct {
	// MaxRounds is the round cap when a call gives none (default 64).
	MaxRounds int `yaml:"max_rounds,omitempty"`
	// Timeout bounds one whole call (default 12h).
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// registerGoalModules registers the goal tools and ralph. Every session
// has a goal keeper (the host's round driver and its goal commands use
// it); these rows only decide whether the model gets the tools.
func registerGoalModules(must func(compose.Module)) {
	must(toolModule("tool/create_goal", goal.ToolCreate, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return goal.CreateTool(e.goals, e.log), nil
	}))
	must(toolModule("tool/get_goal", goal.ToolGet, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return goal.GetTool(e.goals), nil
	}))
	must(toolModule("tool/update_goal", goal.ToolUpdate, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
		return goal.UpdateTool(e.goals), nil
	}))
	must(toolModule("tool/ralph", ralph.Name, ralphConfig{}, func(e *env, c ralphConfig) (tool.Definition, error) {
		if e.subagents == nil {
			return tool.Definition{}, errUnavailable
		}
		return ralph.New(ralph.Options{Service: e.subagents, Provider: "spawn", ResolveLog: e.app.live.resolve,
			MaxRounds: c.MaxRounds, Timeout: c.Timeout})
	}))
}
