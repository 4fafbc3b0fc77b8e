package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"sync"
	"time"
)

// LoginPath is where a one-time sign-in code is traded for the cookie:
// GET /login?code=CODE.
const LoginPath = "/login"

// LoginCodeTTL is how long a sign-in code stays valid.
const LoginCodeTTL = time.Minute

// loginCodeBytes is a code's entropy: 256 bits, like the token's.
const loginCodeBytes = 32

// loginCodes are the sign-in codes handed out (dsh serve --open puts one
// in the URL it gives the browser opener, whose command line every local
// user can read; the token itself never goes there). A code works once,
// within LoginCodeTTL.
type loginCodes struct {
	mu    sync.Mutex
	codes []*loginCode // guarded by mu; expired ones are dropped
}

type loginCode struct {
	code    []byte
	expires time.Time
	used    bool
}

// NewLoginCode returns a fresh one-time sign-in code: the URL
// LoginPath?code=CODE signs a browser in once, within LoginCodeTTL.
func (s *Server) NewLoginCode() (string, error) {
	buf := make([]byte, loginCodeBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate sign-in code: %w", err)
	}
	code := base64.RawURLEncoding.EncodeToString(buf)
	now := s.now()
	s.logins.mu.Lock()
	defer s.logins.mu.Unlock()
	s.logins.prune(now)
	s.logins.codes = append(s.logins.codes, &loginCode{code: []byte(code), expires: now.Add(LoginCodeTTL)})
	return code, nil
}

// prune drops the codes that have expired. Called with mu held.
func (l *loginCodes) prune(now time.Time) {
	kept := l.codes[:0]
	for _, c := range l.codes {
		if now.Before(c.expires) {
			kept = append(kept, c)
		}
	}
	clear(l.codes[len(kept):])
	l.codes = kept
}

// redeem uses up code: "" when it was valid, else why not. Every stored
// code is compared, in constant time each, so the time taken tells
// nothing about how close a guess came.
func (l *loginCodes) redeem(code string, now time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	var match *loginCode
	for _, c := range l.codes {
		if subtle.ConstantTimeCompare(c.code, []byte(code)) == 1 {
			match = c
		}
	}
	switch {
	case match == nil:
		return "it has expired (a sign-in link works for one minute) or was not made by this dsh serve"
	case match.used:
		return "it has already been used (a sign-in link works once). If you did not open it twice yourself, someone else may have signed in with it: delete $DSH_HOME/serve/token and restart dsh serve to shut them out"
	}
	match.used = true
	return ""
}

func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// login is GET /login?code=CODE: a valid code sets the token's cookie and
// redirects to the bare UI, so the code leaves the address bar and the
// history; any other gets a page that says why. Only GET redeems (a HEAD
// from a link checker must not use the code up).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet {
		h.Set("Allow", "GET")
		writeError(w, newError(CodeMethodNotAllowed, r.Method+" is not allowed on "+LoginPath))
		return
	}
	why := s.logins.redeem(r.URL.Query().Get("code"), s.now())
	if why == "" {
		s.setTokenCookie(w)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>dsh: sign-in link not valid</title></head>
<body><h1>This sign-in link cannot be used</h1><p>%s.</p><p>Open the URL that dsh serve printed, or run <code>dsh serve --open</code> again.</p></body></html>
`, html.EscapeString(why))
}

// setTokenCookie gives the browser the token as the cookie every API
// request then carries.
func (s *Server) setTokenCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: s.opts.Token, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		MaxAge: 400 * 24 * 3600,
	})
}
