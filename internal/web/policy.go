package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// DefaultMaxURLLength bounds a request URL when Policy.MaxURLLength is 0.
const DefaultMaxURLLength = 8192

// Resolver looks up a host's addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Policy is the network policy of the HTTP fetch provider: which URLs may
// be requested and which addresses a request may connect to. The zero
// value is the strict default (system resolver, DNS64 detection, no
// allowlist).
type Policy struct {
	// Resolver resolves host names; nil means net.DefaultResolver. Each
	// host is resolved once per request and the connection is pinned to
	// the answers, so a second, different answer is never used.
	Resolver Resolver
	// Allow lists hosts ("intranet.example", "127.0.0.1", "::1") or
	// host:port pairs ("localhost:8080", "[::1]:8080") that may be
	// fetched although they resolve to non-public addresses. A host entry
	// matches any port. Only an operator sets this; it is never derived
	// from model input.
	Allow []string
	// DNS64Prefixes are operator-known active NAT64 prefixes, checked in
	// addition to the well-known ones and to those DetectDNS64 finds.
	DNS64Prefixes []netip.Prefix
	// DetectDNS64 finds the network's active DNS64 prefixes; it runs only
	// when an answer set holds IPv6 addresses. Nil means [DetectDNS64]
	// through Resolver; a lookup failure counts as "no DNS64", which is
	// what a network without DNS64 answers.
	DetectDNS64 func(ctx context.Context) ([]netip.Prefix, error)
	// MaxURLLength bounds a URL; 0 means DefaultMaxURLLength.
	MaxURLLength int
}

// Destination is a URL that passed the policy, with the only addresses a
// connection to it may use.
type Destination struct {
	// URL is the normalised URL (lower-case scheme and host, numeric IPv4
	// forms rewritten to dotted quads, no fragment).
	URL *url.URL
	// Host is URL's host name without brackets or port.
	Host string
	// Port is the effective port ("80" or "443" when the URL has none).
	Port string
	// Addrs are the validated addresses, in answer order.
	Addrs []netip.Addr
	// Allowlisted reports that an Allow entry let a non-public host
	// through.
	Allowlisted bool
}

func (p *Policy) resolver() Resolver {
	if p.Resolver == nil {
		return net.DefaultResolver
	}
	return p.Resolver
}

// Check validates raw and resolves its host: see [ValidateURL] and
// [Policy.CheckURL].
func (p *Policy) Check(ctx context.Context, raw string) (*Destination, error) {
	u, err := ValidateURL(raw, p.MaxURLLength)
	if err != nil {
		return nil, err
	}
	return p.CheckURL(ctx, u)
}

// CheckURL resolves u's host once and refuses the whole answer set when
// any answer is not public (unless the host is allowlisted). u must come
// from ValidateURL or CheckRedirect.
func (p *Policy) CheckURL(ctx context.Context, u *url.URL) (*Destination, error) {
	host, port := u.Hostname(), EffectivePort(u)
	d := &Destination{URL: u, Host: host, Port: port, Allowlisted: p.allowed(host, port)}
	lit, err := netip.ParseAddr(host)
	literal := err == nil
	if literal {
		d.Addrs = []netip.Addr{lit.Unmap()}
	} else if d.Addrs, err = p.lookup(ctx, host); err != nil {
		return nil, err
	}
	if d.Allowlisted {
		return d, nil
	}
	refuse := func(a netip.Addr, why string) *Error {
		if literal {
			return blocked(host, why, fmt.Sprintf("%s is not a public address: %s", host, why))
		}
		return blocked(host, why, fmt.Sprintf("%s resolves to %s, which is not a public address: %s", host, a, why))
	}
	// The static checks run first so a non-public answer is refused
	// without the extra lookup DNS64 detection costs.
	v6 := false
	for _, a := range d.Addrs {
		if why := NonPublic(a, p.DNS64Prefixes); why != "" {
			return nil, refuse(a, why)
		}
		v6 = v6 || a.Is6()
	}
	if !v6 {
		return d, nil
	}
	detected, err := p.detectDNS64(ctx)
	if err != nil {
		return nil, err
	}
	dns64 := append(append([]netip.Prefix(nil), p.DNS64Prefixes...), detected...)
	for _, a := range d.Addrs {
		if why := NonPublic(a, dns64); why != "" {
			return nil, refuse(a, why)
		}
	}
	return d, nil
}

// lookup resolves host once, returning its distinct addresses with
// IPv4-mapped answers unmapped (they are dialled, and judged, as IPv4).
func (p *Policy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	// The resolver may answer a cancelled context from a lookup already
	// in flight or done (TestRealDNSCancelled saw an answer under load):
	// a cancelled request stops here, whatever the resolver does.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	answers, err := p.resolver().LookupIPAddr(ctx, host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Code: CodeProviderError, Message: fmt.Sprintf("cannot resolve %s: %v", host, err), Host: host, Err: err}
	}
	var addrs []netip.Addr
	for _, ans := range answers {
		a, ok := netip.AddrFromSlice(ans.IP)
		if !ok {
			return nil, Errorf(CodeProviderError, "%s resolved to an invalid address", host)
		}
		if a = a.Unmap(); !containsAddr(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, Errorf(CodeProviderError, "%s resolved to no addresses", host)
	}
	return addrs, nil
}

func (p *Policy) detectDNS64(ctx context.Context) ([]netip.Prefix, error) {
	detect := p.DetectDNS64
	if detect == nil {
		detect = func(ctx context.Context) ([]netip.Prefix, error) { return DetectDNS64(ctx, p.resolver()) }
	}
	prefixes, err := detect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// NXDOMAIN for ipv4only.arpa is the normal answer of a network
		// without DNS64; the well-known prefixes are checked regardless.
		return nil, nil
	}
	return prefixes, nil
}

func blocked(host, why, msg string) *Error {
	return &Error{Code: CodeDestinationBlocked, Message: msg, Host: host, Reason: why}
}

func containsAddr(as []netip.Addr, a netip.Addr) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}

// allowed reports whether an Allow entry names host (any port) or
// host:port.
func (p *Policy) allowed(host, port string) bool {
	for _, e := range p.Allow {
		e = strings.ToLower(strings.TrimSpace(e))
		eh, ep := e, ""
		if h, pt, err := net.SplitHostPort(e); err == nil {
			eh, ep = h, pt
		}
		eh = strings.TrimSuffix(strings.Trim(eh, "[]"), ".")
		if a, err := netip.ParseAddr(eh); err == nil {
			eh = a.Unmap().String()
		}
		if eh == host && (ep == "" || ep == port) {
			return true
		}
	}
	return false
}

// EffectivePort is u's port, or the scheme's default.
func EffectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// SameOrigin reports whether a and b share scheme, host and effective
// port.
func SameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && a.Hostname() == b.Hostname() && EffectivePort(a) == EffectivePort(b)
}

// ValidateURL parses raw as an absolute http(s) URL without credentials
// and normalises its host, without touching the network. Numeric IPv4
// spellings that URL parsers and resolvers accept ("2130706433",
// "0x7f.1", "017700000001") are rewritten to dotted quads so the policy
// sees the address they mean; a host that ends in a number but is no
// valid IPv4 address is refused. maxLen 0 means DefaultMaxURLLength.
func ValidateURL(raw string, maxLen int) (*url.URL, error) {
	if maxLen <= 0 {
		maxLen = DefaultMaxURLLength
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, Errorf(CodeInvalidURL, "the URL is empty")
	}
	if len(raw) > maxLen {
		return nil, Errorf(CodeInvalidURL, "the URL is longer than %d bytes", maxLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &Error{Code: CodeInvalidURL, Message: "invalid URL: " + excerpt(raw), Err: err}
	}
	return normalizeURL(u, raw)
}

func normalizeURL(u *url.URL, raw string) (*url.URL, error) {
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return nil, Errorf(CodeInvalidURL, "%s is not an absolute URL (it needs http:// or https://)", excerpt(raw))
		}
		return nil, Errorf(CodeInvalidURL, "unsupported URL scheme %q: only http and https are allowed", u.Scheme)
	}
	if u.User != nil {
		return nil, Errorf(CodeBlockedURL, "URLs with credentials (user:password@) are not allowed")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, Errorf(CodeInvalidURL, "%s has no host", excerpt(raw))
	}
	host, err := normalizeHost(u)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, Errorf(CodeInvalidURL, "invalid port %q", port)
		}
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport += ":" + port
	}
	u.Host = hostport
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// normalizeHost returns u's host name in the form the policy judges: an
// IPv6 literal in canonical form, a numeric IPv4 spelling as a dotted
// quad, or a lower-case DNS name.
func normalizeHost(u *url.URL) (string, error) {
	host := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", Errorf(CodeInvalidURL, "invalid IPv6 address %q", host)
		}
		if a.Zone() != "" {
			return "", Errorf(CodeInvalidURL, "IPv6 zones are not allowed in URLs")
		}
		// A mapped address keeps its mapped spelling: the policy judges
		// it by the IPv4 address it carries.
		return a.String(), nil
	}
	host = strings.ToLower(host)
	if host == "" {
		return "", Errorf(CodeInvalidURL, "the URL has no host")
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return "", Errorf(CodeInvalidURL, "host %q is not ASCII; use its punycode (xn--) form", host)
		}
	}
	if endsInNumber(host) {
		a, ok := parseIPv4Loose(host)
		if !ok {
			return "", Errorf(CodeInvalidURL, "host %q is not a valid IPv4 address", host)
		}
		return a.String(), nil
	}
	name := strings.TrimSuffix(host, ".")
	if len(name) > 253 {
		return "", Errorf(CodeInvalidURL, "host name is longer than 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", Errorf(CodeInvalidURL, "invalid host name %q", host)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", Errorf(CodeInvalidURL, "invalid character %q in host name %q", c, host)
			}
		}
	}
	return host, nil
}

// endsInNumber is the WHATWG URL "ends in a number" test: such a host is
// parsed as IPv4 by browsers and by inet_aton-style resolvers, so it must
// be judged as an address, never as a name.
func endsInNumber(host string) bool {
	labels := strings.Split(host, ".")
	if labels[len(labels)-1] == "" && len(labels) > 1 {
		labels = labels[:len(labels)-1]
	}
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if isDigits(last, 10) {
		return true
	}
	// "0x" alone is a number (zero) too.
	return len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') &&
		(len(last) == 2 || isDigits(last[2:], 16))
}

// parseIPv4Loose parses the inet_aton forms: one to four parts, each
// decimal, octal (leading 0) or hex (0x); the last part fills the
// remaining bytes.
func parseIPv4Loose(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, part := range parts {
		n, ok := parseIPv4Part(part)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Part(s string) (uint64, bool) {
	base := 10
	switch {
	case s == "":
		return 0, false
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		s, base = s[2:], 16
		if s == "" {
			return 0, true // WHATWG reads a bare "0x" as zero
		}
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if !isDigits(s, base) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}

func isDigits(s string, base int) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= '0' && c <= '9' && int(c-'0') < base ||
			base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')
		if !ok {
			return false
		}
	}
	return true
}

// CheckRedirect resolves a Location header against from and decides
// whether the redirect may be followed: the target must be a valid URL
// (ValidateURL's rules) on the same origin. A cross-origin target is
// refused with WEB_REDIRECT_BLOCKED naming it, because following it would
// skip the fresh decision a new tool call gets. The caller still checks
// the target's addresses with CheckURL.
func CheckRedirect(from *url.URL, location string, maxLen int) (*url.URL, error) {
	if strings.TrimSpace(location) == "" {
		return nil, Errorf(CodeProviderError, "redirect without a Location header")
	}
	ref, err := url.Parse(strings.TrimSpace(location))
	if err != nil {
		return nil, &Error{Code: CodeProviderError, Message: "invalid redirect Location: " + excerpt(location), Err: err}
	}
	target := from.ResolveReference(ref)
	if maxLen <= 0 {
		maxLen = DefaultMaxURLLength
	}
	s := target.String()
	if len(s) > maxLen {
		return nil, Errorf(CodeInvalidURL, "redirect target is longer than %d bytes", maxLen)
	}
	u, err := normalizeURL(target, s)
	if err != nil {
		var we *Error
		if errors.As(err, &we) {
			we.Message = "redirect to an invalid target: " + we.Message
		}
		return nil, err
	}
	if !SameOrigin(from, u) {
		return nil, &Error{
			Code: CodeRedirectBlocked,
			Message: fmt.Sprintf("the server redirected to another origin: %s; it was not followed. "+
				"Fetch that URL with a new call if you want it", excerpt(u.String())),
			Target: u.String(),
		}
	}
	return u, nil
}

// excerpt bounds a URL quoted in a message.
func excerpt(s string) string { return clip(strings.ToValidUTF8(s, "\uFFFD"), 300) }
