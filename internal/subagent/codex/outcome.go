package codex

import (
	"encoding/json"
	"time"
)

// Outcome statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusAborted   = "aborted"
)

// Failure categories: why a run did not complete. They are distinct so a
// caller can tell a slow task from a broken peer.
const (
	// CategoryInvalid: the request was refused before anything started.
	CategoryInvalid = "invalid-request"
	// CategorySpawn: the codex executable could not be started.
	CategorySpawn = "spawn"
	// CategoryDeadline: the run's deadline passed (start-up included).
	CategoryDeadline = "deadline"
	// CategoryCancelled: the caller cancelled the run.
	CategoryCancelled = "cancelled"
	// CategoryProtocol: the app-server answered something unusable.
	CategoryProtocol = "protocol"
	// CategoryProcessExit: the app-server exited unexpectedly.
	CategoryProcessExit = "process-exit"
	// CategoryTurnFailed: the turn completed with status failed.
	CategoryTurnFailed = "turn-failed"
	// CategoryResumeRefused: an explicit thread could not be resumed.
	CategoryResumeRefused = "resume-refused"
	// CategoryConfigMismatch: the effective configuration the app-server
	// reported differs from what was requested.
	CategoryConfigMismatch = "config-mismatch"
	// CategorySchema: the answer did not satisfy output_schema.
	CategorySchema = "schema"
	// CategoryCleanup: the process group could not be confirmed gone.
	CategoryCleanup = "cleanup"
)

// Outcome is everything known about one delegation; `dsh delegate` prints
// it as the receipt. It is published once and never changes afterwards.
type Outcome struct {
	RunID    string `json:"runId"`
	Status   string `json:"status"`
	Category string `json:"category,omitempty"`
	Error    string `json:"error,omitempty"`

	// Text is the final answer; with an output schema, the exact JSON
	// text the app-server returned.
	Text string `json:"text"`
	// Structured is Text when it satisfied the output schema.
	Structured json.RawMessage `json:"structured,omitempty"`

	ThreadID   string `json:"threadId,omitempty"`
	TurnID     string `json:"turnId,omitempty"`
	ThreadMode string `json:"threadMode"`
	// Resumed is true when the run continued an existing thread.
	Resumed bool `json:"resumed"`

	Requested Requested  `json:"requested"`
	Effective *Effective `json:"effective,omitempty"`
	Effort    Effort     `json:"effort"`

	Usage      UsageReport     `json:"usage"`
	RateLimits json.RawMessage `json:"rateLimits,omitempty"`

	Images   []Image  `json:"images,omitempty"`
	Activity Activity `json:"activity"`

	Process ProcessFacts `json:"process"`
	Cleanup CleanupFacts `json:"cleanup"`

	Notes      []string  `json:"notes,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	EndedAt    time.Time `json:"endedAt"`
	DurationMs int64     `json:"durationMs"`
}

// Requested is the configuration the run asked for.
type Requested struct {
	Model          string `json:"model,omitempty"`
	Cwd            string `json:"cwd"`
	PermissionMode string `json:"permissionMode"`
	ApprovalPolicy string `json:"approvalPolicy"`
	Sandbox        string `json:"sandbox"`
	Effort         string `json:"reasoningEffort,omitempty"`
	OutputSchema   bool   `json:"outputSchema"`
	Images         int    `json:"images"`
	ThreadID       string `json:"threadId,omitempty"`
	TimeoutMs      int64  `json:"timeoutMs"`
}

// Effective is the configuration the app-server reported for the thread.
type Effective struct {
	Model             string          `json:"model"`
	ModelProvider     string          `json:"modelProvider,omitempty"`
	Cwd               string          `json:"cwd"`
	ApprovalPolicy    string          `json:"approvalPolicy"`
	ApprovalsReviewer string          `json:"approvalsReviewer,omitempty"`
	Sandbox           json.RawMessage `json:"sandbox"`
	ReasoningEffort   *string         `json:"reasoningEffort"`
}

// Effort is the evidence of how reasoning effort was requested: effort is
// a turn/start field; the thread's own default is what the app-server
// reported and is not restated.
type Effort struct {
	Requested     string  `json:"requested,omitempty"`
	SentOnTurn    bool    `json:"sentOnTurn"`
	ThreadDefault *string `json:"threadDefault"`
}

// Image is a picture the run produced: a file it viewed (Path) or an image
// block from a tool result (Data).
type Image struct {
	Path      string `json:"path,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	Data      []byte `json:"-"`
	Bytes     int    `json:"bytes,omitempty"`
}

// Activity counts what the run did.
type Activity struct {
	Commands    int `json:"commands"`
	FileChanges int `json:"fileChanges"`
	Messages    int `json:"messages"`
	Approvals   int `json:"approvals"`
}

// ProcessFacts describe the app-server process. Exit is nil when the exit
// was not observed: an unknown exit is never reported as 0.
type ProcessFacts struct {
	Argv   []string   `json:"argv"`
	Pid    int        `json:"pid,omitempty"`
	Pgid   int        `json:"pgid,omitempty"`
	Exit   *ExitFacts `json:"exit"`
	Stderr string     `json:"stderrTail,omitempty"`
}

// ExitFacts is how the app-server process ended.
type ExitFacts struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
}

// CleanupFacts report the teardown of the process group.
type CleanupFacts struct {
	Confirmed bool     `json:"confirmed"`
	Signals   []string `json:"signals,omitempty"`
	Remaining []int    `json:"remaining,omitempty"`
}

// Checkpoint is a typed progress mark of a run, in order: spawned,
// initialized, thread, turn-started, turn-completed, finished.
type Checkpoint struct {
	Name string         `json:"name"`
	At   time.Time      `json:"at"`
	Data map[string]any `json:"data,omitempty"`
}

// Observer receives a run's checkpoints and activity lines while it goes.
// Either may be nil. Calls come from the run's goroutines, never after the
// outcome is published, and must not block.
type Observer struct {
	Checkpoint func(Checkpoint)
	Progress   func(line string)
}
