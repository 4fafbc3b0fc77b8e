package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
	"github.com/dsh-dev/dsh/internal/tools/question"
)

func sessionsCmd(ctx context.Context, args []string, stdio IO) int {
	if len(args) == 0 {
		fmt.Fprint(stdio.Stderr, usage())
		return ExitUsage
	}
	switch args[0] {
	case "list", "ls":
		return sessionsList(ctx, args[1:], stdio)
	case "show":
		return sessionsShow(ctx, args[1:], stdio)
	case "export":
		return sessionsExport(ctx, args[1:], stdio)
	case "import":
		return sessionsImport(ctx, args[1:], stdio)
	case "tree":
		return sessionsTree(ctx, args[1:], stdio)
	case "search":
		return sessionsSearch(ctx, args[1:], stdio)
	case "reindex":
		return sessionsReindex(ctx, args[1:], stdio)
	}
	fmt.Fprintf(stdio.Stderr, "dsh sessions: unknown subcommand %q\n", args[0])
	return ExitUsage
}

func sessionsShow(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("sessions show", stdio)
	asJSON := fs.Bool("json", false, "print the raw events, one JSON object per line")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh sessions show: exactly one session ID is required")
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	id, err := a.Store.Resolve(ctx, pos[0])
	if err != nil {
		return fail(stdio, err)
	}
	if err := streamSession(ctx, a.Store, id, *asJSON, stdio.Stdout); err != nil {
		return fail(stdio, err)
	}
	return ExitOK
}

// showPage is how many events `sessions show` reads at a time.
const showPage = 512

// streamSession prints session id as Inspect would give it (inbox
// references expanded, a crashed log's closers added) without holding
// the log: it reads the store a page at a time and writes each event as
// it goes, keeping only what expansion and balancing need. An event that
// does not read ends the output there with the error (the pages before
// it are already written).
func streamSession(ctx context.Context, st store.Sessions, id string, asJSON bool, out io.Writer) error {
	ent, err := st.Get(ctx, id)
	if err != nil {
		return err
	}
	if ent.Err != nil {
		return ent.Err // an unreadable header
	}
	w := bufio.NewWriterSize(out, 64<<10)
	var x session.Expander
	var bal session.Balance
	// An Encoder (not Marshal) keeps the output byte-identical to what
	// one wrote for the whole log.
	enc := json.NewEncoder(w)
	emit := func(e session.Event) error {
		if asJSON {
			return enc.Encode(e)
		}
		writeTranscriptEvent(w, e)
		return nil
	}
	if !asJSON {
		writeTranscriptHead(w, ent.Header, ent.Title)
	}
	for from := int64(0); ; {
		page, err := st.ReadPage(ctx, id, from, showPage)
		if err != nil {
			return err
		}
		for _, e := range page {
			bal.Add(e)
			if e, err = x.Expand(e); err != nil {
				return fmt.Errorf("session %s: %w: %w", id, store.ErrCorrupt, err)
			}
			if err := emit(e); err != nil {
				return err
			}
		}
		if len(page) < showPage {
			break
		}
		from += int64(len(page))
		if err := w.Flush(); err != nil {
			return err
		}
	}
	for _, e := range bal.Closers() {
		if err := emit(e); err != nil {
			return err
		}
	}
	return w.Flush()
}

// Transcript renders a log as a readable transcript.
func Transcript(h session.Header, events []session.Event) string {
	var b strings.Builder
	writeTranscriptHead(&b, h, transcriptTitle(events))
	for _, e := range events {
		writeTranscriptEvent(&b, e)
	}
	return b.String()
}

// writeTranscriptHead writes the transcript's first lines.
func writeTranscriptHead(b io.Writer, h session.Header, title string) {
	fmt.Fprintf(b, "session %s  created %s  cwd %s\n", h.ID, time.UnixMilli(h.CreatedAt).UTC().Format(time.RFC3339), h.Cwd)
	if title != "" {
		fmt.Fprintf(b, "title %s\n", title)
	}
}

// writeTranscriptEvent writes the transcript lines of one event.
func writeTranscriptEvent(b io.Writer, e session.Event) {
	switch e.Type {
	case session.TypeTitle:
		var p session.Title
		_ = e.Decode(&p)
		if p.Error != nil {
			fmt.Fprintf(b, "[title] %s/%s failed: %s\n", p.Provider, p.Model, p.Error.Error())
		} else {
			fmt.Fprintf(b, "[title] %s/%s named the session %q\n", p.Provider, p.Model, p.Title)
		}
	case session.TypeTurnStart:
		var p session.TurnStart
		_ = e.Decode(&p)
		fmt.Fprintf(b, "\n── turn %d ──\n", p.Turn)
	case session.TypeUserMessage:
		var m llm.Message
		_ = e.Decode(&m)
		label := "user"
		switch {
		case m.Source.Plugin == "compaction":
			label = "summary"
		case m.Source.Kind == "goal":
			label = fmt.Sprintf("goal round %d", m.Source.Round)
		case m.Source.Kind != "user":
			label = "context"
		}
		fmt.Fprintf(b, "[%s] %s\n", label, indent(blocksText(m.Content)))
	case session.TypeAssistantMsg:
		var p session.AssistantMessage
		_ = e.Decode(&p)
		for _, bl := range p.Message.Content {
			switch bl.Type {
			case llm.BlockReasoning:
				fmt.Fprintf(b, "[thinking] %s\n", indent(bl.Text))
			case llm.BlockText:
				fmt.Fprintf(b, "[assistant] %s\n", indent(bl.Text))
			}
		}
		if p.Interrupted {
			io.WriteString(b, "[assistant] (interrupted)\n")
		}
	case session.TypeToolCall:
		var p session.ToolCall
		_ = e.Decode(&p)
		fmt.Fprintf(b, "[tool %s] %s\n", p.Name, indent(p.Arguments))
	case session.TypeToolResult:
		var p session.ToolResult
		_ = e.Decode(&p)
		status := "result"
		if p.IsError {
			status = "error"
			if p.Error != nil {
				status += " " + p.Error.Code
			}
		}
		fmt.Fprintf(b, "[%s %s] %s\n", p.Name, status, indent(blocksText(p.Content)))
	case session.TypeCompactionStart:
		io.WriteString(b, "[compaction] started\n")
	case session.TypeCompactionSummary:
		var p struct {
			ShadowedSeqs       []int64 `json:"shadowedSeqs"`
			ShadowedTokenCount int     `json:"shadowedTokenCount"`
		}
		_ = e.Decode(&p)
		fmt.Fprintf(b, "[compaction] %d earlier messages (~%d tokens) summarised for the model; they stay in this transcript\n", len(p.ShadowedSeqs), p.ShadowedTokenCount)
	case session.TypeCompactionEnd:
		var p struct {
			Error *llm.Failure `json:"error"`
		}
		_ = e.Decode(&p)
		if p.Error != nil {
			fmt.Fprintf(b, "[compaction] failed: %s\n", p.Error.Error())
		}
	case session.TypeLLMRetry:
		var p session.LLMRetry
		_ = e.Decode(&p)
		fmt.Fprintf(b, "[retry %d in %dms] %s\n", p.Retry, p.DelayMs, p.Failure.Error())
	case session.TypePlanMode:
		var p question.PlanMode
		_ = e.Decode(&p)
		state := "off"
		if p.Active {
			state = "on"
		}
		fmt.Fprintf(b, "[plan mode] %s (%s)\n", state, p.Source)
	case session.TypeQuestionAnswer:
		var p question.Answered
		_ = e.Decode(&p)
		io.WriteString(b, questionLine(p))
	case session.TypeGoalChange, session.TypeRalphRound:
		io.WriteString(b, goalLine(e))
	case session.TypeTurnEnd:
		var p session.TurnEnd
		_ = e.Decode(&p)
		s := p.Reason.Kind
		if p.Reason.Cause != "" {
			s += " (" + p.Reason.Cause + ")"
		}
		if p.Reason.Failure != nil {
			s += ": " + p.Reason.Failure.Error()
		}
		fmt.Fprintf(b, "── turn %d %s ──\n", p.Turn, s)
	}
}

// transcriptTitle is the session's title as the store folds it: the
// last model title, else the first prompt's.
func transcriptTitle(events []session.Event) string {
	title := ""
	for _, e := range events {
		if t, fromModel := session.TitleOf(e); fromModel || title == "" {
			title = t
		}
	}
	return title
}

func blocksText(bs []llm.Block) string {
	var parts []string
	for _, b := range bs {
		switch b.Type {
		case llm.BlockText, llm.BlockReasoning:
			parts = append(parts, b.Text)
		case llm.BlockImage:
			parts = append(parts, "[image "+b.MediaType+"]")
		}
	}
	return strings.Join(parts, "\n")
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
			lines[i] = "    " + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

func sessionsExport(ctx context.Context, args []string, stdio IO) int {
	if len(args) != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh sessions export: exactly one session ID is required")
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	id, err := a.Store.Resolve(ctx, args[0])
	if err != nil {
		return fail(stdio, err)
	}
	if err := a.Store.Export(ctx, id, stdio.Stdout); err != nil {
		return fail(stdio, err)
	}
	return ExitOK
}

func sessionsTree(ctx context.Context, args []string, stdio IO) int {
	fs := newFlags("sessions tree", stdio)
	asJSON := fs.Bool("json", false, "print the rows as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return ExitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintln(stdio.Stderr, "dsh sessions tree: exactly one session ID is required")
		return ExitUsage
	}
	a, code := openReadOnly(ctx, stdio)
	if a == nil {
		return code
	}
	defer a.Close()
	id, err := a.Store.Resolve(ctx, pos[0])
	if err != nil {
		return fail(stdio, err)
	}
	rows, err := catalog.ListDescendants(ctx, a.CatalogDeps(), id)
	if err != nil {
		return fail(stdio, err)
	}
	if *asJSON {
		return writeJSON(stdio, rows)
	}
	fmt.Fprintf(stdio.Stdout, "%s\n%s", id, catalog.FormatTree(rows))
	return ExitOK
}

// questionLine renders a question/answer (the question itself is in the
// tool call above it).
func questionLine(p question.Answered) string {
	switch {
	case p.Status != question.StatusAnswered:
		return "[answer] " + p.Status + "\n"
	case p.Approved != nil && *p.Approved:
		return "[answer] plan approved" + feedbackText(p.Feedback) + "\n"
	case p.Approved != nil:
		return "[answer] keep planning" + feedbackText(p.Feedback) + "\n"
	}
	ids := make([]string, 0, len(p.Answers))
	for id := range p.Answers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	b.WriteString("[answer]")
	for _, id := range ids {
		fmt.Fprintf(&b, " %s: %s;", id, strings.Join(p.Answers[id], ", "))
	}
	return strings.TrimSuffix(b.String(), ";") + "\n"
}

func feedbackText(f string) string {
	if f == "" {
		return ""
	}
	return ": " + f
}
