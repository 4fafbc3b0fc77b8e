package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// fakeResolver answers from a table. A host may have several answer
// sets: lookup n gets set n (the last one repeats), which is how tests
// model DNS rebinding. It counts lookups per host.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	calls   map[string]int
}

func newResolver(m map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]string{}, calls: map[string]int{}}
	for h, a := range m {
		r.answers[h] = [][]string{a}
	}
	return r
}

// sequence sets the answer sets successive lookups of host get.
func (r *fakeResolver) sequence(host string, sets ...[]string) *fakeResolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = sets
	return r
}

func (r *fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.calls[host]
	r.calls[host]++
	sets, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	set := sets[min(n, len(sets)-1)]
	out := make([]net.IPAddr, 0, len(set))
	for _, s := range set {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, ctx.Err()
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// mappedDialer stands in for the internet: it connects validated public
// addresses to loopback fixtures and records every address it was asked
// to dial, so tests can prove which addresses a request used.
type mappedDialer struct {
	mu     sync.Mutex
	routes map[string]string // "ip:port" → fixture "127.0.0.1:port"
	dialed []string
}

func newDialer() *mappedDialer { return &mappedDialer{routes: map[string]string{}} }

// route makes addr (an "ip:port" the policy validated) reach srv.
func (d *mappedDialer) route(addr string, srv *httptest.Server) *mappedDialer {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.routes[addr] = srv.Listener.Addr().String()
	return d
}

func (d *mappedDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	target, ok := d.routes[addr]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test dialer: no route to %s", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, target)
}

func (d *mappedDialer) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// noDNS64 disables DNS64 detection in tests that do not exercise it.
func noDNS64(context.Context) ([]netip.Prefix, error) { return nil, nil }

// publicIP is the address tests resolve "public" names to; the mapped
// dialer routes it to a fixture.
const publicIP = "93.184.216.34"

// fixture serves handler on loopback and routes publicIP:80 to it.
func fixture(t *testing.T, handler http.Handler) (*httptest.Server, *mappedDialer) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv, newDialer().route(publicIP+":80", srv)
}

func codeOf(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a *web.Error", err, err)
	}
	return we.Code
}

func wantCode(t *testing.T, err error, code string) *Error {
	t.Helper()
	if got := codeOf(t, err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
	var we *Error
	errors.As(err, &we)
	return we
}

func contains(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q", s, sub)
	}
}
