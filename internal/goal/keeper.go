package goal

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
)

// State is a session's goal as its log says now.
type State struct {
	// Goal is the current goal (nil: none, or cleared).
	Goal *Goal `json:"goal,omitempty"`
	// Armed: the round driver may start rounds (see the package comment).
	Armed bool `json:"armed"`
}

// Current reads the goal state of log from its latest goal/change event.
func Current(log *session.Log) (State, error) {
	ev, ok := log.Latest(session.TypeGoalChange)
	if !ok {
		return State{}, nil
	}
	var c Change
	if err := ev.Decode(&c); err != nil {
		return State{}, fmt.Errorf("goal/change at seq %d: %w", ev.Seq, err)
	}
	// Arming belongs to the process that appended it: an event from
	// before this process's first live event (a resumed or forked log)
	// leaves the goal disarmed.
	return State{Goal: c.Goal, Armed: c.Armed && c.Goal != nil && ev.Seq >= log.FirstLiveSeq()}, nil
}

// Fold replays the goal/change events of a log through Apply and returns
// the goal they leave, or the first illegal change.
func Fold(events []session.Event) (*Goal, error) {
	var cur *Goal
	for _, ev := range events {
		if ev.Type != session.TypeGoalChange {
			continue
		}
		var c Change
		if err := ev.Decode(&c); err != nil {
			return nil, fmt.Errorf("goal/change at seq %d: %w", ev.Seq, err)
		}
		next, err := Apply(cur, c)
		if err != nil {
			return nil, fmt.Errorf("goal/change at seq %d: %w", ev.Seq, err)
		}
		cur = next
	}
	return cur, nil
}

// Keeper is the one writer of a session's goal: every change is checked
// against the current state and appended under its lock, so a tool call
// and a person's command cannot interleave their read and their write.
type Keeper struct {
	log *session.Log
	now func() time.Time
	// toolless: the session's model has no update_goal tool (a preset
	// without it), so round messages do not tell it to call one.
	toolless bool

	mu sync.Mutex // held from the read of the state to its append
}

// NewKeeper returns the keeper of log's goal.
func NewKeeper(log *session.Log) *Keeper {
	return &Keeper{log: log, now: time.Now}
}

// NoTools tells the keeper that the session's model cannot call
// update_goal, so round messages say that the rounds run to the cap or
// until a person stops them. Call it before the session runs.
func (k *Keeper) NoTools() { k.toolless = true }

// State returns the current goal state.
func (k *Keeper) State() (State, error) { return Current(k.log) }

// append checks c against the state and logs it.
func (k *Keeper) append(cur *Goal, c Change) (*Goal, error) {
	c.Version = Version
	next, err := Apply(cur, c)
	if err != nil {
		return nil, err
	}
	// Ignorable: an older build that does not know goals can still open
	// the session (it loses only the goal, never the conversation).
	if _, err := k.log.Append(session.TypeGoalChange, c, session.Ignorable()); err != nil {
		return nil, fmt.Errorf("log goal/change: %w", err)
	}
	return next, nil
}

// Create starts a goal (armed). maxRounds 0 means DefaultMaxRounds.
func (k *Keeper) Create(by, objective string, maxRounds int, callID string) (Goal, error) {
	objective = strings.TrimSpace(objective)
	if maxRounds == 0 {
		maxRounds = DefaultMaxRounds
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := k.State()
	if err != nil {
		return Goal{}, err
	}
	now := k.now().UnixMilli()
	g := &Goal{ID: newID(), Objective: objective, Phase: PhaseActive, Revision: 1, MaxRounds: maxRounds, CreatedAt: now, UpdatedAt: now}
	out, err := k.append(st.Goal, Change{Operation: OpCreate, Goal: g, By: by, CallID: callID, Armed: true})
	if err != nil {
		return Goal{}, err
	}
	return *out, nil
}

// Actions of Update (update_goal's action argument).
const (
	ActionEdit     = "edit"
	ActionPause    = "pause"
	ActionResume   = "resume"
	ActionComplete = "complete"
	ActionBlocked  = "blocked"
)

// Update is one update_goal request.
type Update struct {
	GoalID string
	// Revision must be the goal's current revision; 0 skips the check
	// (a person's command, which acts on whatever goal there is).
	Revision  int
	Action    string
	Objective *string
	MaxRounds *int
	// Reason explains a block (required) or a pause.
	Reason string
	By     string
	CallID string
}

// Update applies u to the current goal.
func (k *Keeper) Update(u Update) (Goal, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := k.State()
	if err != nil {
		return Goal{}, err
	}
	cur := st.Goal
	if cur == nil {
		return Goal{}, errorf(CodeNotFound, "there is no goal in this session")
	}
	if u.GoalID != "" && u.GoalID != cur.ID {
		return Goal{}, errorf(CodeNotFound, "no goal %q here; the current goal is %s", u.GoalID, cur.ID)
	}
	if u.Revision != 0 && u.Revision != cur.Revision {
		return Goal{}, errorf(CodeStaleRevision, "revision %d is stale: goal %s is at revision %d (%s); read it again with get_goal", u.Revision, cur.ID, cur.Revision, cur.Phase)
	}
	next := cur.clone()
	next.UpdatedAt = k.now().UnixMilli()
	next.Revision++
	c := Change{Goal: next, By: u.By, CallID: u.CallID, Reason: strings.TrimSpace(u.Reason)}
	switch u.Action {
	case ActionEdit:
		c.Operation = OpEdit
		if u.Objective == nil && u.MaxRounds == nil {
			return Goal{}, errorf(CodeInvalidArgument, "edit needs objective or max_goal_rounds")
		}
		if u.Objective != nil {
			next.Objective = strings.TrimSpace(*u.Objective)
		}
		if u.MaxRounds != nil {
			if *u.MaxRounds < cur.Rounds {
				return Goal{}, errorf(CodeInvalidArgument, "max_goal_rounds %d is below the %d rounds already started", *u.MaxRounds, cur.Rounds)
			}
			next.MaxRounds = *u.MaxRounds
		}
		c.Armed = st.Armed
	case ActionPause:
		c.Operation, next.Phase, next.BlockedReason = OpPause, PhasePaused, ""
	case ActionResume:
		if cur.Rounds >= cur.MaxRounds {
			return Goal{}, errorf(CodeCapReached, "goal %s has used all %d of its rounds; raise max_goal_rounds with an edit first", cur.ID, cur.MaxRounds)
		}
		c.Operation, next.Phase, next.BlockedReason, c.Armed = OpResume, PhaseActive, "", true
	case ActionComplete:
		c.Operation, next.Phase, next.BlockedReason = OpComplete, PhaseComplete, ""
	case ActionBlocked:
		if c.Reason == "" {
			return Goal{}, errorf(CodeInvalidArgument, "blocked needs a reason: what stops the goal")
		}
		c.Operation, next.Phase, next.BlockedReason = OpBlock, PhaseBlocked, c.Reason
	default:
		return Goal{}, errorf(CodeInvalidAction, "action %q: want edit, pause, resume, complete or blocked", u.Action)
	}
	out, err := k.append(cur, c)
	if err != nil {
		return Goal{}, err
	}
	return *out, nil
}

// Arm arms an active goal that is not armed (a resumed or forked
// session), or resumes a paused or blocked one (which arms it). An armed
// goal is returned as is.
func (k *Keeper) Arm(by string) (Goal, error) {
	k.mu.Lock()
	st, err := k.State()
	if err != nil {
		k.mu.Unlock()
		return Goal{}, err
	}
	cur := st.Goal
	switch {
	case cur == nil:
		k.mu.Unlock()
		return Goal{}, errorf(CodeNotFound, "there is no goal in this session")
	case cur.Phase == PhasePaused || cur.Phase == PhaseBlocked:
		k.mu.Unlock()
		return k.Update(Update{Action: ActionResume, By: by})
	case cur.Phase == PhaseComplete:
		k.mu.Unlock()
		return Goal{}, errorf(CodeInvalidTransition, "goal %s is complete", cur.ID)
	}
	defer k.mu.Unlock()
	if st.Armed {
		return *cur, nil
	}
	if cur.Rounds >= cur.MaxRounds {
		return Goal{}, errorf(CodeCapReached, "goal %s has used all %d of its rounds; raise max_goal_rounds first", cur.ID, cur.MaxRounds)
	}
	next := cur.clone()
	next.UpdatedAt = k.now().UnixMilli()
	out, err := k.append(cur, Change{Operation: OpArm, Goal: next, By: by, Armed: true})
	if err != nil {
		return Goal{}, err
	}
	return *out, nil
}

// Clear removes the goal.
func (k *Keeper) Clear(by, reason string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := k.State()
	if err != nil {
		return err
	}
	if st.Goal == nil {
		return errorf(CodeNotFound, "there is no goal in this session")
	}
	_, err = k.append(st.Goal, Change{Operation: OpClear, Cleared: st.Goal.ID, By: by, Reason: reason})
	return err
}

// NextRound is the driver's step after a run ended normally: for an armed
// active goal it logs the next round and returns its message; at the
// round cap it blocks the goal instead (logged, so every surface shows
// why the rounds stopped) and returns ok false.
func (k *Keeper) NextRound() (msg llm.Message, ok bool, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := k.State()
	if err != nil || st.Goal == nil || !st.Armed || st.Goal.Phase != PhaseActive {
		return llm.Message{}, false, err
	}
	cur := st.Goal
	next := cur.clone()
	next.UpdatedAt = k.now().UnixMilli()
	if cur.Rounds >= cur.MaxRounds {
		reason := fmt.Sprintf("round cap reached: %d of %d rounds started", cur.Rounds, cur.MaxRounds)
		next.Phase, next.BlockedReason = PhaseBlocked, reason
		next.Revision++
		_, err := k.append(cur, Change{Operation: OpBlock, Goal: next, By: ByDriver, Reason: reason})
		return llm.Message{}, false, err
	}
	next.Rounds++
	if _, err := k.append(cur, Change{Operation: OpRound, Goal: next, By: ByDriver, Armed: true}); err != nil {
		return llm.Message{}, false, err
	}
	if k.toolless {
		return roundMessage(*next, false), true, nil
	}
	return RoundMessage(*next), true, nil
}

// Interrupt pauses an armed active goal whose round did not end normally
// (a person cancelled it, or it failed), so the driver stops until a
// person resumes it. It reports whether it paused the goal.
func (k *Keeper) Interrupt(reason string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := k.State()
	if err != nil || st.Goal == nil || !st.Armed || st.Goal.Phase != PhaseActive {
		return false, err
	}
	next := st.Goal.clone()
	next.UpdatedAt = k.now().UnixMilli()
	next.Revision++
	next.Phase = PhasePaused
	_, err = k.append(st.Goal, Change{Operation: OpPause, Goal: next, By: ByDriver, Reason: reason})
	return err == nil, err
}

// RoundMessage is the user message that starts a round of g (g.Rounds is
// the round's number): the objective and how to report the outcome.
func RoundMessage(g Goal) llm.Message { return roundMessage(g, true) }

func roundMessage(g Goal, tools bool) llm.Message {
	how := fmt.Sprintf("When it is fully achieved, call update_goal with goal_id %q, revision %d and action \"complete\". "+
		"If you cannot make progress without the user, call update_goal with action \"blocked\" and a reason. "+
		"Otherwise do the next piece of work; another round follows when this turn ends.", g.ID, g.Revision)
	if !tools {
		how = "Do the next piece of work; another round follows when this turn ends, until the round cap or until the user stops the goal. " +
			"When the goal is already achieved, say so briefly and change nothing."
	}
	text := fmt.Sprintf("[Goal round %d of %d] Keep working toward the goal below. %s\n\nGoal: %s", g.Rounds, g.MaxRounds, how, g.Objective)
	return llm.Message{
		ID: newID(), Role: llm.RoleUser, Content: []llm.Block{llm.TextBlock(text)},
		Source: llm.Source{Kind: "goal", GoalID: g.ID, Revision: g.Revision, Round: g.Rounds},
	}
}

// goalWord matches the word "goal" (or "goals"), however written.
var goalWord = regexp.MustCompile(`(?i)\bgoals?\b`)

// Authorized is the human-authority rule for create_goal: the model may
// create a goal only when a person asked for one in the turn that makes
// the call, that is, when a user/message of the current turn (since its
// turn/start) comes from a person (source kind "user", or none: what the
// host's Send delivers from a surface; not a goal round, a subagent's
// parent, a notice or injected context) and its text contains the word
// "goal". A person who wants a goal without asking the
// model uses /goal, dsh run --goal or the HTTP API, which need no tool.
func Authorized(log *session.Log) bool {
	for e := range log.View().Backward() {
		switch e.Type {
		case session.TypeTurnStart:
			return false
		case session.TypeUserMessage:
			var m llm.Message
			if e.Decode(&m) != nil {
				continue
			}
			if (m.Source.Kind == "user" || m.Source.Kind == "") && goalWord.MatchString(m.Text()) {
				return true
			}
		}
	}
	return false
}

func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
