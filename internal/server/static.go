package server

import (
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/dsh-dev/dsh/internal/server/webui"
)

// static serves the embedded UI. /?token=T trades the token for the
// cookie and redirects to the bare URL, so the token leaves the address
// bar and the history; unknown extension-less paths get index.html (the
// UI routes on the client).
func (s *Server) static() http.Handler {
	files := webui.FS()
	// webui.Handler serves the files with a strict same-origin CSP and
	// ETags; this wrapper adds the token exchange and the client routes.
	ui := webui.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, newError(CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path))
			return
		}
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "frame-ancestors 'none'")
		if q := r.URL.Query(); q.Has("token") {
			if tokenEqual(q.Get("token"), s.opts.Token) {
				s.setTokenCookie(w)
			}
			q.Del("token")
			target := r.URL.Path
			if enc := q.Encode(); enc != "" {
				target += "?" + enc
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name != "" {
			if _, err := fs.Stat(files, name); err != nil && !strings.Contains(path.Base(name), ".") {
				r2 := r.Clone(r.Context())
				r2.URL.Path = "/"
				r = r2
			}
		}
		ui.ServeHTTP(w, r)
	})
}
