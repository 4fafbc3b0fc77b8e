package goal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/tool"
)

// Model-facing tool names.
const (
	ToolCreate = "create_goal"
	ToolGet    = "get_goal"
	ToolUpdate = "update_goal"
)

// Tools returns the three goal tools over one session's keeper and log.
func Tools(k *Keeper, log *session.Log) []tool.Definition {
	return []tool.Definition{CreateTool(k, log), GetTool(k), UpdateTool(k)}
}

// CreateTool returns create_goal.
func CreateTool(k *Keeper, log *session.Log) tool.Definition {
	return tool.Definition{
		Name: ToolCreate,
		Description: "Start a goal for this session: a long-running objective that you keep working on over several rounds. " +
			"When your turn ends, the harness starts the next round with a message restating the goal, until you call update_goal " +
			"with action \"complete\" (or \"blocked\"), a person pauses it, or max_goal_rounds rounds have run. " +
			"Only call this when the user explicitly asked for a goal in their latest message; otherwise it is refused " +
			"(the user can start one themselves with /goal). There is at most one goal at a time.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"objective":{"type":"string","description":"The objective, complete and self-contained: what done looks like."},` +
			`"max_goal_rounds":{"type":"integer","minimum":1,"maximum":1000,"description":"At most this many rounds (default 20)."}` +
			`},"required":["objective"],"additionalProperties":false}`),
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				Objective *string `json:"objective"`
				MaxRounds *int    `json:"max_goal_rounds"`
			}
			if err := strictDecode(c.Arguments, &a); err != nil {
				return tool.Result{}, err
			}
			if a.Objective == nil {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "objective is required")
			}
			if !Authorized(log) {
				return tool.Result{}, tool.Errorf(CodeNotAuthorized, "create_goal needs the user's explicit request in this turn: "+
					"a goal runs rounds on its own, so only a person may start one. Do the task normally, or ask the user to start a goal (/goal OBJECTIVE).")
			}
			maxRounds := 0
			if a.MaxRounds != nil {
				if *a.MaxRounds < 1 {
					return tool.Result{}, tool.Errorf(CodeInvalidArgument, "max_goal_rounds must be at least 1")
				}
				maxRounds = *a.MaxRounds
			}
			g, err := k.Create(ByModel, *a.Objective, maxRounds, c.ID)
			if err != nil {
				return tool.Result{}, toolError(err)
			}
			return result("Goal created; the next round starts when this turn ends.", &g)
		},
	}
}

// GetTool returns get_goal.
func GetTool(k *Keeper) tool.Definition {
	return tool.Definition{
		Name:            ToolGet,
		Description:     "Read this session's goal: its id, objective, phase (active, paused, blocked, complete), revision (needed by update_goal), round cap and rounds started.",
		Parameters:      json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			if err := strictDecode(c.Arguments, &struct{}{}); err != nil {
				return tool.Result{}, err
			}
			st, err := k.State()
			if err != nil {
				return tool.Result{}, toolError(err)
			}
			if st.Goal == nil {
				return tool.Result{}, tool.Errorf(CodeNotFound, "there is no goal in this session")
			}
			return result("", st.Goal)
		},
	}
}

// UpdateTool returns update_goal.
func UpdateTool(k *Keeper) tool.Definition {
	return tool.Definition{
		Name: ToolUpdate,
		Description: "Change this session's goal. Pass the goal_id and the revision you last read (get_goal, or the round message); " +
			"a stale revision is refused. Actions: \"complete\" when the objective is fully achieved (the rounds stop), " +
			"\"blocked\" with a reason when you cannot go on without the user, \"pause\" and \"resume\", " +
			"\"edit\" to restate the objective or change max_goal_rounds.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"goal_id":{"type":"string"},` +
			`"revision":{"type":"integer","minimum":1},` +
			`"action":{"type":"string","enum":["edit","pause","resume","complete","blocked"]},` +
			`"objective":{"type":"string","description":"edit: the new objective."},` +
			`"max_goal_rounds":{"type":"integer","minimum":1,"maximum":1000,"description":"edit: the new round cap."},` +
			`"reason":{"type":"string","description":"blocked (required) or pause: why."}` +
			`},"required":["goal_id","revision","action"],"additionalProperties":false}`),
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				GoalID    *string `json:"goal_id"`
				Revision  *int    `json:"revision"`
				Action    *string `json:"action"`
				Objective *string `json:"objective"`
				MaxRounds *int    `json:"max_goal_rounds"`
				Reason    string  `json:"reason"`
			}
			if err := strictDecode(c.Arguments, &a); err != nil {
				return tool.Result{}, err
			}
			switch {
			case a.GoalID == nil || strings.TrimSpace(*a.GoalID) == "":
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "goal_id is required")
			case a.Revision == nil || *a.Revision < 1:
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "revision is required (a positive integer from get_goal)")
			case a.Action == nil:
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "action is required")
			}
			if (a.Objective != nil || a.MaxRounds != nil) && *a.Action != ActionEdit {
				return tool.Result{}, tool.Errorf(CodeInvalidArgument, "objective and max_goal_rounds go with action \"edit\" only")
			}
			g, err := k.Update(Update{GoalID: *a.GoalID, Revision: *a.Revision, Action: *a.Action, Objective: a.Objective,
				MaxRounds: a.MaxRounds, Reason: a.Reason, By: ByModel, CallID: c.ID})
			if err != nil {
				return tool.Result{}, toolError(err)
			}
			note := map[string]string{
				ActionEdit: "Goal updated.", ActionPause: "Goal paused; no round starts until it is resumed.",
				ActionResume: "Goal resumed.", ActionComplete: "Goal complete; no further rounds.",
				ActionBlocked: "Goal blocked; no further rounds until the user resumes it.",
			}[*a.Action]
			return result(note, &g)
		},
	}
}

// result is a text line and the goal as JSON.
func result(note string, g *Goal) (tool.Result, error) {
	b, err := json.Marshal(g)
	if err != nil {
		return tool.Result{}, err
	}
	text := string(b)
	if note != "" {
		text = note + "\n" + text
	}
	r := tool.Text(text)
	r.Meta = b
	return r, nil
}

// toolError keeps a goal error's code.
func toolError(err error) error {
	var ge *Error
	if errors.As(err, &ge) {
		return tool.Errorf(ge.Code, "%s", ge.Message)
	}
	return err
}

// strictDecode decodes the arguments object, refusing unknown fields.
func strictDecode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return tool.Errorf(tool.CodeInvalidArgs, "invalid arguments: %s", plain(err))
	}
	return nil
}

// plain words an encoding/json error without Go type names.
func plain(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s has the wrong type (%s)", te.Field, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
