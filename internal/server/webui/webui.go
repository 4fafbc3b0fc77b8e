// Package webui is the browser UI of dsh serve: plain HTML, CSS and ES
// modules embedded in the binary, so that `go build` alone produces a dsh
// whose UI works (no Node.js, no build step, no network requests beyond
// its own origin). The UI renders every session from its event log, read
// through the HTTP API of internal/server.
package webui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed static
var embedded embed.FS

// files is the static directory, index.html at its root.
var files = func() fs.FS {
	sub, err := fs.Sub(embedded, "static")
	if err != nil {
		panic(err) // the embedded directory exists: a build without it fails
	}
	return sub
}()

// FS returns the UI's files (index.html, style.css and the ES modules),
// index.html at the root.
func FS() fs.FS { return files }

// csp keeps the page to its own origin: no CDN, no inline script, no
// framing. connect-src 'self' covers fetch and EventSource; img-src allows
// data: for images a user pasted into a prompt.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// etags holds a content hash per file, computed once, at the first request
// (not at package initialisation: every dsh process links this package,
// and hashing the UI cost each start ~0.3 ms): embedded files have no
// modification time, and a strong validator lets a reload revalidate with
// a 304 instead of downloading again.
var etags = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m[p] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return m
})

// Handler serves the UI: "/" is index.html, every other path names one
// embedded file (404 otherwise). Only GET and HEAD are answered. The
// server mounts it at "/" beside "/api/"; the UI keeps its own routes in
// the URL fragment, so no fallback to index.html is needed.
func Handler() http.Handler {
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		tag, ok := etags()[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// no-cache: always revalidate (cheap with the ETag), so a new dsh
		// binary's UI is picked up by the next reload.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", tag)
		if name == "index.html" {
			// FileServer redirects /index.html to /; serve the file directly.
			b, _ := fs.ReadFile(files, name)
			if match := r.Header.Get("If-None-Match"); match == tag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			h.Set("Content-Type", "text/html; charset=utf-8")
			if r.Method == http.MethodGet {
				_, _ = w.Write(b)
			}
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		fileServer.ServeHTTP(w, r2)
	})
}
