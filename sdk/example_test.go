package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm/llmtest"
	"github.com/dsh-dev/dsh/sdk"
)

// A program embedding dsh: a session with an extra tool, one prompt, and
// the session's events read back through the iterator.
func Example() {
	// A scripted stand-in for the model provider, so the example runs
	// offline; a real program sets DEEPSEEK_API_KEY (or configures another
	// provider in the home's config.yaml) instead.
	model := llmtest.New()
	defer model.Close()
	model.Enqueue(llmtest.Response{ToolCalls: []llmtest.ToolCall{{Name: "word_count", Arguments: `{"text":"one two three"}`}}})
	model.Enqueue(llmtest.Response{Text: "It has 3 words."})
	os.Setenv("DEEPSEEK_API_KEY", "example-key")
	os.Setenv("DEEPSEEK_BASE_URL", model.URL())
	home, err := os.MkdirTemp("", "dsh-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)

	ctx := context.Background()
	client, err := sdk.Open(ctx, sdk.Options{
		Home: home,
		Tools: []sdk.Tool{{
			Name:        "word_count",
			Description: "Counts the words of a text.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
			Run: func(ctx context.Context, args json.RawMessage) (string, error) {
				var a struct{ Text string }
				if err := json.Unmarshal(args, &a); err != nil {
					return "", err
				}
				return fmt.Sprint(len(strings.Fields(a.Text))), nil
			},
		}},
		// Every approval is refused here; a real program asks its user.
		Approve: func(ctx context.Context, a sdk.Approval) sdk.Decision {
			return sdk.Decision{Feedback: "not allowed in this program"}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	s, err := client.Create(ctx, sdk.SessionOptions{Cwd: home})
	if err != nil {
		log.Fatal(err)
	}
	res, err := s.Prompt(ctx, "How many words are in 'one two three'?")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status+":", res.Text)

	// The session's log, stored then live: stop at the end of the turn.
	for e, err := range s.Events(ctx, -1) {
		if err != nil {
			log.Fatal(err)
		}
		if e.Type == "tool/result" {
			var r struct {
				Name    string
				Content []struct{ Text string }
			}
			_ = json.Unmarshal(e.Data, &r)
			fmt.Println("tool", r.Name, "answered", r.Content[0].Text)
		}
		if e.Type == "turn/end" {
			break
		}
	}
	// Output:
	// completed: It has 3 words.
	// tool word_count answered 3
}
