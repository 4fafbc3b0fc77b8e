package question

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Converser is a line terminal held for a whole form: fn's read shows a
// prompt and reads one line, and nothing else (an approval) is put on the
// terminal until fn returns. permission.Terminal implements it, so
// questions and approvals share dsh run's terminal.
type Converser interface {
	Converse(ctx context.Context, fn func(read func(prompt string) (string, error)) error) error
}

// Terminal is the Asker of dsh run on a terminal: each question is shown
// with its numbered options and answered with a number (several,
// separated by commas or spaces, for a multi-select question), an
// option's label, or free text; a plan is approved with y and otherwise
// sent back with what was typed as feedback. An invalid answer is asked
// again. End of input makes the question unavailable.
type Terminal struct {
	Term Converser
}

// maxRetries bounds how often one question is asked again after an
// invalid answer, so that a stuck input cannot loop forever.
const maxRetries = 5

// Ask implements Asker.
func (t Terminal) Ask(ctx context.Context, r Request) (Answer, error) {
	var out Answer
	err := t.Term.Converse(ctx, func(read func(string) (string, error)) error {
		if r.Kind == KindPlan {
			line, err := read(renderPlan(r.Plan))
			if err != nil {
				return err
			}
			line = strings.TrimSpace(line)
			yes := strings.EqualFold(line, "y") || strings.EqualFold(line, "yes")
			out.Approve = &yes
			if !yes && !strings.EqualFold(line, "n") && !strings.EqualFold(line, "no") {
				out.Feedback = line
			}
			return nil
		}
		out.Answers = map[string][]string{}
		for i, it := range r.Items {
			prompt := renderItem(it, i, len(r.Items))
			for try := 0; ; try++ {
				line, err := read(prompt)
				if err != nil {
					return err
				}
				got, msg := parseLine(it, line)
				if msg == "" {
					out.Answers[it.ID] = got
					break
				}
				if try == maxRetries {
					return fmt.Errorf("no valid answer to question %q after %d tries", it.ID, maxRetries+1)
				}
				prompt = "  " + msg + "\n> "
			}
		}
		return nil
	})
	if err != nil {
		return Answer{}, err
	}
	return out, nil
}

// parseLine reads one typed answer: numbers of options, a label, or
// free text. msg says what is wrong with an invalid answer.
func parseLine(it Item, line string) ([]string, string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, "Type a number, or your own answer."
	}
	if l, ok := it.label(line); ok {
		return []string{l}, ""
	}
	fields := strings.FieldsFunc(line, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	var labels []string
	numbers := true
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil {
			numbers = false
			break
		}
		if n < 1 || n > len(it.Options) {
			return nil, fmt.Sprintf("There is no option %d: choose 1 to %d.", n, len(it.Options))
		}
		l := it.Options[n-1].Label
		for _, have := range labels {
			if have == l {
				return nil, fmt.Sprintf("Option %d is chosen twice.", n)
			}
		}
		labels = append(labels, l)
	}
	if !numbers {
		if len(line) > MaxFreeText {
			return nil, fmt.Sprintf("That answer is too long (at most %d bytes).", MaxFreeText)
		}
		return []string{line}, ""
	}
	if len(labels) > 1 && !it.MultiSelect {
		return nil, "Choose one option."
	}
	return labels, ""
}

func renderItem(it Item, i, n int) string {
	var b strings.Builder
	b.WriteString("\nQuestion from the agent")
	if n > 1 {
		fmt.Fprintf(&b, " (%d of %d)", i+1, n)
	}
	if it.Header != "" {
		fmt.Fprintf(&b, " — %s", clean(it.Header))
	}
	fmt.Fprintf(&b, "\n  %s\n", indent(clean(it.Question)))
	for j, o := range it.Options {
		fmt.Fprintf(&b, "    %d. %s", j+1, clean(o.Label))
		if o.Description != "" {
			fmt.Fprintf(&b, " — %s", indent(clean(o.Description)))
		}
		b.WriteString("\n")
	}
	if it.MultiSelect {
		b.WriteString("  Answer with one or more numbers (e.g. 1,3), or type your own answer.\n> ")
	} else {
		b.WriteString("  Answer with a number, or type your own answer.\n> ")
	}
	return b.String()
}

func renderPlan(plan string) string {
	var b strings.Builder
	b.WriteString("\nThe agent's plan:\n")
	for _, l := range strings.Split(clean(plan), "\n") {
		b.WriteString("  │ ")
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("Approve the plan? y approves; anything else keeps planning (what you type is sent as feedback).\n> ")
	return b.String()
}

// clean drops control characters (escape sequences could rewrite the
// prompt) except newlines and tabs.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return -1
		}
		return r
	}, s)
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }
