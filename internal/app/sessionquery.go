package app

import (
	"github.com/dsh-dev/dsh/internal/compose"
	"github.com/dsh-dev/dsh/internal/sessionquery"
	"github.com/dsh-dev/dsh/internal/tool"
	sqtools "github.com/dsh-dev/dsh/internal/tools/sessionquery"
)

// registerSessionQueryModules registers the session search tools, one
// module per tool ("tool/session_search", …). They read the app's store,
// authorised from the calling session. The rows are in the built-in
// profile but no preset lists the tools: like DSH, session search is
// opt-in (a preset row that names them turns them on).
func registerSessionQueryModules(must func(compose.Module)) {
	for _, name := range []string{sqtools.SearchName, sqtools.EventSearchName, sqtools.EventReadName, sqtools.TraceName, sqtools.EventTraceName} {
		must(toolModule("tool/"+name, name, struct{}{}, func(e *env, _ struct{}) (tool.Definition, error) {
			d, _ := sqtools.ByName(sqtools.Options{Service: sessionquery.New(e.app.Store)}, name)
			return d, nil
		}))
	}
}
