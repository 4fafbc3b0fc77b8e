package codex_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/jobs"
	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/subagent/codex"
	"github.com/dsh-dev/dsh/internal/tool"
)

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func call(t *testing.T, def tool.Definition, f *fake, args string) (tool.Result, error) {
	t.Helper()
	return def.Execute(ctxT(t), &tool.Call{ID: "c1", Name: def.Name, Arguments: json.RawMessage(args), SessionID: "s1", Cwd: f.work})
}

func text(r tool.Result) string {
	var s []string
	for _, b := range r.Content {
		if b.Type == llm.BlockText {
			s = append(s, b.Text)
		}
	}
	return strings.Join(s, "\n")
}

func TestToolArguments(t *testing.T) {
	f := newFake(t, codex.Config{}, `{}`)
	def, err := codex.NewTool(codex.ToolOptions{Provider: f.p})
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(def.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	props := schema["properties"].(map[string]any)
	if _, ok := props["model"]; ok {
		t.Fatal("model offered with model selection off")
	}
	if _, ok := props["run_in_background"]; ok {
		t.Fatal("run_in_background offered without jobs")
	}
	for _, tc := range []struct{ args, want string }{
		{`{"description":"x"}`, "prompt is required"},
		{`{"description":"x","prompt":"y","model":"m"}`, `unknown argument "model"`},
		{`{"description":"x","prompt":"y","timeout_ms":-1}`, "timeout_ms"},
		{`{"description":"x","prompt":"y","images":"a.png"}`, "images must be an array"},
		{`{"description":"x","prompt":"y","output_schema":"{}"}`, "output_schema must be"},
		{`{"description":"x","prompt":"y","thread_mode":"forever"}`, "thread_mode"},
		{`{"description":"x","prompt":"y","images":["/nonexistent.png"]}`, "/nonexistent.png"},
	} {
		_, err := call(t, def, f, tc.args)
		var te *tool.Error
		if err == nil || !strings.Contains(err.Error(), tc.want) || !asToolError(err, &te) || te.Code != tool.CodeInvalidArgs {
			t.Errorf("%s: err %v, want INVALID_ARGUMENTS containing %q", tc.args, err, tc.want)
		}
	}
	if len(f.fakeLines("start")) != 0 {
		t.Fatal("invalid arguments spawned the app-server")
	}
}

func asToolError(err error, te **tool.Error) bool {
	e, ok := err.(*tool.Error)
	*te = e
	return ok
}

func TestToolResults(t *testing.T) {
	shot := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(shot, pngBytes(t), 0o600); err != nil {
		t.Fatal(err)
	}
	block := base64.StdEncoding.EncodeToString(pngBytes(t))
	script := fmt.Sprintf(`{"turns":[{"items":[{"type":"imageView","path":%q},{"type":"mcpToolCall","server":"s","tool":"shot","image_base64":%q,"mime":"image/png"}],"answer":"looked"}]}`, shot, block)

	t.Run("durable human text ends with the marker; images delivered", func(t *testing.T) {
		f := newFake(t, codex.Config{}, script)
		def, _ := codex.NewTool(codex.ToolOptions{Provider: f.p, Images: true})
		res, err := call(t, def, f, `{"description":"look","prompt":"look at it","thread_mode":"persistent"}`)
		if err != nil || res.IsError {
			t.Fatalf("err %v result %+v", err, res)
		}
		var meta struct{ ThreadID string }
		_ = json.Unmarshal(res.Meta, &meta)
		if want := "looked\n\n[codex thread " + meta.ThreadID + " · persistent · pass it as thread_id to continue]"; text(res) != want {
			t.Fatalf("text %q, want %q", text(res), want)
		}
		n := 0
		for _, b := range res.Content {
			if b.Type == llm.BlockImage && b.MediaType == "image/png" && b.Data != "" {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d image blocks in %+v", n, res.Content)
		}
	})
	t.Run("a route without images gets a note, never a failure", func(t *testing.T) {
		f := newFake(t, codex.Config{}, script)
		def, _ := codex.NewTool(codex.ToolOptions{Provider: f.p, Images: false})
		res, err := call(t, def, f, `{"description":"look","prompt":"look at it"}`)
		if err != nil || res.IsError {
			t.Fatalf("err %v result %+v", err, res)
		}
		if got := text(res); got != "looked\n[2 image(s) not delivered: this model route declares no image input: "+shot+"]" {
			t.Fatalf("text %q", got)
		}
	})
	t.Run("schema answers stay pure JSON", func(t *testing.T) {
		f := newFake(t, codex.Config{}, `{"turns":[{"answer":"{\"ok\":true}"}]}`)
		def, _ := codex.NewTool(codex.ToolOptions{Provider: f.p})
		res, err := call(t, def, f, `{"description":"v","prompt":"p","thread_mode":"persistent","output_schema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}`)
		if err != nil || res.IsError || text(res) != `{"ok":true}` {
			t.Fatalf("err %v text %q", err, text(res))
		}
	})
	t.Run("failures carry a stable code per category", func(t *testing.T) {
		f := newFake(t, codex.Config{}, `{"exit_at":"turn","exit_code":3}`)
		def, _ := codex.NewTool(codex.ToolOptions{Provider: f.p})
		res, err := call(t, def, f, `{"description":"v","prompt":"p"}`)
		if err != nil || !res.IsError || res.Error == nil || res.Error.Code != "CODEX_PROCESS_EXIT" {
			t.Fatalf("err %v result %+v", err, res)
		}
	})
	t.Run("the session's sandbox caps the permission mode", func(t *testing.T) {
		f := newFake(t, codex.Config{}, `{}`)
		def, _ := codex.NewTool(codex.ToolOptions{Provider: f.p, MaxMode: func(*tool.Call) string { return codex.ModeReadOnly }})
		res, err := call(t, def, f, `{"description":"v","prompt":"p"}`)
		if err != nil || res.IsError {
			t.Fatalf("err %v result %+v", err, res)
		}
		if got := params(f.received("thread/start")[0])["sandbox"]; got != "read-only" {
			t.Fatalf("sandbox %v", got)
		}
		if _, err := call(t, def, f, `{"description":"v","prompt":"p","permission_mode":"workspace-write"}`); err == nil || !strings.Contains(err.Error(), "may only narrow") {
			t.Fatalf("widening accepted: %v", err)
		}
	})
}

func TestToolBackgroundJobShowsProgress(t *testing.T) {
	f := newFake(t, codex.Config{}, `{"turns":[{"items":[{"type":"commandExecution","command":"make test","output":"ok\n","exitCode":0},{"type":"agentMessage","text":"tests pass","phase":"commentary"}],"answer":"finished"}]}`)
	reg := jobs.New(jobs.Options{})
	defer reg.Close()
	def, _ := codex.NewTool(codex.ToolOptions{Provider: f.p, Jobs: reg})
	res, err := call(t, def, f, `{"description":"bg","prompt":"p","run_in_background":true,"thread_mode":"persistent"}`)
	if err != nil || res.IsError {
		t.Fatalf("err %v result %+v", err, res)
	}
	var meta struct{ JobID string }
	if err := json.Unmarshal(res.Meta, &meta); err != nil || meta.JobID == "" {
		t.Fatalf("meta %s", res.Meta)
	}
	job, err := reg.Wait(context.Background(), meta.JobID)
	if err != nil || job.Status != jobs.Completed {
		t.Fatalf("job %+v err %v", job, err)
	}
	out, _, _, _ := reg.Read(meta.JobID, 0)
	for _, want := range []string{"codex thread ", "$ make test → exit 0", "codex: tests pass", "codex delegation completed", "finished", "pass it as thread_id"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("job output lacks %q:\n%s", want, out)
		}
	}
}
