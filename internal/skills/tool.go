package skills

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-dev/dsh/internal/tool"
)

// ToolName is the skill tool's model-facing name.
const ToolName = "skill"

// maxListed bounds the bundled files listed in a result; the model can
// list a large folder itself.
const maxListed = 50

//go:embed skill.md
var description string

var parameters = json.RawMessage(`{"type":"object",` +
	`"properties":{"name":{"type":"string","description":"The skill's name, exactly as listed in <available_skills>."}},` +
	`"required":["name"],"additionalProperties":false}`)

// New returns the skill tool. Skills are discovered again on every call,
// from the call's working directory, so the tool needs no session state
// and an edited skill is read fresh. It only reads, so calls may overlap.
func New(o Options) tool.Definition {
	return tool.Definition{
		Name:            ToolName,
		Description:     strings.TrimSpace(description),
		Parameters:      parameters,
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			return execute(o, c)
		},
	}
}

// meta is the structured, logged side of a result.
type meta struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Dir  string `json:"dir,omitempty"`
}

func execute(o Options, c *tool.Call) (tool.Result, error) {
	var args struct {
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(c.Arguments, &args); err != nil || args.Name == nil || strings.TrimSpace(*args.Name) == "" {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid arguments for skill: name is required and must be a non-empty string")
	}
	name := strings.TrimPrefix(strings.TrimSpace(*args.Name), "/")
	cwd := c.Cwd
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot determine the working directory: %v", err)
		}
	}
	all, _ := Discover(cwd, o)
	var names []string
	var found *Skill
	for i, s := range all {
		if s.DisableModelInvocation {
			continue
		}
		names = append(names, s.Name)
		if s.Name == name {
			found = &all[i]
		}
	}
	if found == nil {
		if len(names) == 0 {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "unknown skill %q: no skills are available in this session", name)
		}
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "unknown skill %q. Available skills: %s", name, strings.Join(names, ", "))
	}
	body, err := Instructions(*found)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot read skill %s: %v", name, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<skill_content name=%q>\n", found.Name)
	if found.Dir != "" {
		fmt.Fprintf(&b, "<skill_resources base=%q>\n", found.Dir)
		b.WriteString("Paths in the instructions are relative to this directory.")
		if files, more := bundled(found.Dir); len(files) > 0 {
			b.WriteString(" Bundled files:\n" + strings.Join(files, "\n"))
			if more > 0 {
				fmt.Fprintf(&b, "\n… and %d more", more)
			}
		}
		b.WriteString("\n</skill_resources>\n")
	}
	fmt.Fprintf(&b, "<skill_instructions>\n%s\n</skill_instructions>\n</skill_content>", body)
	res := tool.Text(b.String())
	res.Meta, _ = json.Marshal(meta{Name: found.Name, Path: found.Path, Dir: found.Dir})
	return res, nil
}

// bundled lists the files of a skill folder (relative, hidden entries
// and SKILL.md itself left out), at most maxListed of them; more counts
// the rest.
func bundled(dir string) (files []string, more int) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() || rel == SkillFile {
			return nil
		}
		if len(files) < maxListed {
			files = append(files, filepath.ToSlash(rel))
		} else {
			more++
		}
		return nil
	})
	return files, more
}
