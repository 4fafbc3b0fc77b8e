package web

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestValidateURL(t *testing.T) {
	tests := []struct {
		in   string
		want string // normalised URL, or an error code
	}{
		{"https://example.com/a?b=c#frag", "https://example.com/a?b=c"},
		{"  HTTP://Example.COM:8080/x  ", "http://example.com:8080/x"},
		{"http://host:/x", "http://host/x"},
		{"http://under_score.example/", "http://under_score.example/"},
		{"http://example.com./", "http://example.com./"},
		{"http://[2606:4700:4700:0:0:0:0:1111]/", "http://[2606:4700:4700::1111]/"},
		// Numeric IPv4 spellings are rewritten to the address they mean.
		{"http://2130706433/", "http://127.0.0.1/"},
		{"http://0x7f.1/", "http://127.0.0.1/"},
		{"http://0x7F000001/", "http://127.0.0.1/"},
		{"http://017700000001/", "http://127.0.0.1/"},
		{"http://0177.0.0.1/", "http://127.0.0.1/"},
		{"http://127.1/", "http://127.0.0.1/"},
		{"http://10.1.65535/", "http://10.1.255.255/"},
		{"http://0x/", "http://0.0.0.0/"},
		{"http://127.0.0.1./", "http://127.0.0.1/"},
		{"http://134744072:8080/", "http://8.8.8.8:8080/"},
		{"http://256.0.0.1/", CodeInvalidURL},
		{"http://1.2.3.4.5/", CodeInvalidURL},
		{"http://0x1g/", "http://0x1g/"}, // not a number: a (valid) name, as in WHATWG
		{"http://08.0.0.1/", CodeInvalidURL},
		{"http://4294967296/", CodeInvalidURL},
		{"http://example.123/", CodeInvalidURL},
		{"http://99999999999999999999999/", CodeInvalidURL},
		// Credentials.
		{"http://user:pass@example.com/", CodeBlockedURL},
		{"https://user@example.com/", CodeBlockedURL},
		{"http://:pw@example.com/", CodeBlockedURL},
		// Schemes and shapes.
		{"ftp://example.com/", CodeInvalidURL},
		{"file:///etc/passwd", CodeInvalidURL},
		{"javascript:alert(1)", CodeInvalidURL},
		{"example.com/path", CodeInvalidURL},
		{"//example.com/", CodeInvalidURL},
		{"http:example.com", CodeInvalidURL},
		{"http:///path", CodeInvalidURL},
		{"", CodeInvalidURL},
		{"http://exa mple.com/", CodeInvalidURL},
		{"http://ex$mple.com/", CodeInvalidURL},
		{"http://a..b/", CodeInvalidURL},
		{"http://" + strings.Repeat("a", 64) + ".com/", CodeInvalidURL},
		{"http://ÄÖ.de/", CodeInvalidURL},
		{"http://example.com:0/", CodeInvalidURL},
		{"http://example.com:65536/", CodeInvalidURL},
		{"http://[fe80::1%25eth0]/", CodeInvalidURL},
		{"http://[::1/", CodeInvalidURL},
		{"http://example.com/" + strings.Repeat("a", DefaultMaxURLLength), CodeInvalidURL},
	}
	for _, tt := range tests {
		u, err := ValidateURL(tt.in, 0)
		if strings.HasPrefix(tt.want, "WEB_") {
			if got := codeOf(t, err); got != tt.want {
				t.Errorf("ValidateURL(%q) = %v, %v; want %s", tt.in, u, err, tt.want)
			}
			continue
		}
		if err != nil || u.String() != tt.want {
			t.Errorf("ValidateURL(%q) = %v, %v; want %s", tt.in, u, err, tt.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	res := newResolver(map[string][]string{
		"public.test":   {publicIP, "2606:4700:4700::1111"},
		"private.test":  {"10.0.0.7"},
		"mixed.test":    {publicIP, "192.168.0.10"},
		"mixed6.test":   {"2606:4700:4700::1111", "fd00::1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"nat64.test":    {"64:ff9b::a9fe:a9fe"},
		"dns64.test":    {"2600:64::a00:1"},
		"dns64ok.test":  {"2600:64::808:808"},
		"empty.test":    {},
		"intranet.test": {"10.1.2.3"},
	})
	dns64 := func(context.Context) ([]netip.Prefix, error) {
		return []netip.Prefix{netip.MustParsePrefix("2600:64::/96")}, nil
	}
	p := &Policy{Resolver: res, DetectDNS64: dns64, Allow: []string{"intranet.test", "127.0.0.1:8080", "[::1]"}}
	tests := []struct {
		url    string
		want   string // error code, or "" for allowed
		reason string // part of the block reason
		addrs  string // comma-separated addresses, when allowed
	}{
		{"https://public.test/", "", "", publicIP + ",2606:4700:4700::1111"},
		{"http://private.test/", CodeDestinationBlocked, "private", ""},
		{"http://mixed.test/", CodeDestinationBlocked, "192.168.0.10", ""},
		{"http://mixed6.test/", CodeDestinationBlocked, "unique local", ""},
		{"http://mapped.test/", CodeDestinationBlocked, "loopback", ""},
		{"http://nat64.test/", CodeDestinationBlocked, "169.254.169.254", ""},
		{"http://dns64.test/", CodeDestinationBlocked, "DNS64 prefix 2600:64::/96 translating to 10.0.0.1", ""},
		{"http://dns64ok.test/", "", "", "2600:64::808:808"},
		{"http://empty.test/", CodeProviderError, "", ""},
		{"http://missing.test/", CodeProviderError, "", ""},
		{"http://127.0.0.1/", CodeDestinationBlocked, "loopback", ""},
		{"http://2130706433/", CodeDestinationBlocked, "loopback", ""},
		{"http://[::ffff:7f00:1]/", CodeDestinationBlocked, "loopback", ""},
		{"http://169.254.169.254/latest/meta-data/", CodeDestinationBlocked, "link-local", ""},
		{"http://8.8.8.8/", "", "", "8.8.8.8"},
		// The allowlist: a host entry matches any port, host:port only
		// that port.
		{"http://intranet.test:9000/", "", "", "10.1.2.3"},
		{"http://127.0.0.1:8080/", "", "", "127.0.0.1"},
		{"http://0x7f.1:8080/", "", "", "127.0.0.1"},
		{"http://127.0.0.1:8081/", CodeDestinationBlocked, "loopback", ""},
		{"http://[::1]:1234/", "", "", "::1"},
	}
	for _, tt := range tests {
		d, err := p.Check(context.Background(), tt.url)
		if tt.want != "" {
			e := wantCode(t, err, tt.want)
			if tt.want == CodeDestinationBlocked {
				contains(t, e.Reason+" | "+e.Message, tt.reason)
				contains(t, e.Message, e.Host)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.url, err)
			continue
		}
		var got []string
		for _, a := range d.Addrs {
			got = append(got, a.String())
		}
		if strings.Join(got, ",") != tt.addrs {
			t.Errorf("%s: addrs %v, want %s", tt.url, got, tt.addrs)
		}
	}
	for _, h := range []string{"public.test", "mixed.test"} {
		if n := res.count(h); n != 1 {
			t.Errorf("%s resolved %d times, want once", h, n)
		}
	}
}

func TestDNS64DetectionOnlyWhenNeeded(t *testing.T) {
	res := newResolver(map[string][]string{
		"v4.test":          {publicIP},
		"v6.test":          {"2600:64::a00:1"},
		DNS64DiscoveryHost: {"2600:64::c000:aa"},
	})
	p := &Policy{Resolver: res}
	if _, err := p.Check(context.Background(), "http://v4.test/"); err != nil {
		t.Fatal(err)
	}
	if n := res.count(DNS64DiscoveryHost); n != 0 {
		t.Fatalf("IPv4-only answers ran DNS64 detection %d times", n)
	}
	_, err := p.Check(context.Background(), "http://v6.test/")
	contains(t, wantCode(t, err, CodeDestinationBlocked).Reason, "10.0.0.1")
	if n := res.count(DNS64DiscoveryHost); n != 1 {
		t.Fatalf("detection ran %d times, want 1", n)
	}
	// Without DNS64 (NXDOMAIN for the discovery name) the same address
	// is an ordinary public one.
	p = &Policy{Resolver: newResolver(map[string][]string{"v6.test": {"2600:64::a00:1"}})}
	if _, err := p.Check(context.Background(), "http://v6.test/"); err != nil {
		t.Fatal(err)
	}
	// Operator-configured prefixes need no detection.
	p = &Policy{Resolver: newResolver(map[string][]string{"v6.test": {"2600:64::a00:1"}}), DNS64Prefixes: []netip.Prefix{netip.MustParsePrefix("2600:64::/96")}}
	_, err = p.Check(context.Background(), "http://v6.test/")
	wantCode(t, err, CodeDestinationBlocked)
}

func TestCheckRedirect(t *testing.T) {
	from, _ := ValidateURL("https://example.com/a/b?q=1", 0)
	tests := []struct {
		loc  string
		want string // resolved URL, or an error code
	}{
		{"/c", "https://example.com/c"},
		{"c", "https://example.com/a/c"},
		{"?x=2", "https://example.com/a/b?x=2"},
		{"https://EXAMPLE.com:443/d#f", "https://example.com:443/d"},
		{"//example.com/e", "https://example.com/e"},
		{"http://example.com/", CodeRedirectBlocked},
		{"https://example.com:8443/", CodeRedirectBlocked},
		{"https://other.example/", CodeRedirectBlocked},
		{"https://127.0.0.1/", CodeRedirectBlocked},
		{"//169.254.169.254/", CodeRedirectBlocked},
		{"https://user:pw@example.com/", CodeBlockedURL},
		{"ftp://example.com/", CodeInvalidURL},
		{"", CodeProviderError},
		{"http://[::1", CodeProviderError},
	}
	for _, tt := range tests {
		u, err := CheckRedirect(from, tt.loc, 0)
		if strings.HasPrefix(tt.want, "WEB_") {
			e := wantCode(t, err, tt.want)
			if tt.want == CodeRedirectBlocked && e.Target == "" {
				t.Errorf("%q: cross-origin error names no target", tt.loc)
			}
			continue
		}
		if err != nil || u.String() != tt.want {
			t.Errorf("CheckRedirect(%q) = %v, %v; want %s", tt.loc, u, err, tt.want)
		}
	}
}

// publicOracle is an independent check of "public" built on the net
// package's own predicates plus the ranges it does not know; a fuzzed
// input must never reach an address it rejects.
func publicOracle(a netip.Addr) bool {
	ip := net.IP(a.Unmap().AsSlice())
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "2001:db8::/32", "64:ff9b::/96", "::/96"} {
		if netip.MustParsePrefix(p).Contains(a.Unmap()) {
			if pre := netip.MustParsePrefix(p); pre.Addr().Is6() && pre.Bits() == 96 {
				// Translating forms are public when what they carry is.
				b := a.As16()
				return publicOracle(netip.AddrFrom4([4]byte(b[12:16])))
			}
			return false
		}
	}
	return true
}

// fuzzPolicy resolves every name to a public address, so whatever the
// fuzzer reaches, only literals can be non-public.
func fuzzPolicy() *Policy {
	return &Policy{Resolver: anyName{}, DetectDNS64: noDNS64}
}

type anyName struct{}

func (anyName) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP(publicIP)}}, nil
}

func checkAccepted(t *testing.T, d *Destination) {
	t.Helper()
	for _, a := range d.Addrs {
		if !publicOracle(a) {
			t.Fatalf("accepted %s with non-public address %s", d.URL, a)
		}
	}
	if d.URL.User != nil || (d.URL.Scheme != "http" && d.URL.Scheme != "https") {
		t.Fatalf("accepted %s", d.URL)
	}
}

func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "http://127.0.0.1/", "http://2130706433/", "http://0x7f.1/", "http://[::1]/",
		"http://[::ffff:10.0.0.1]/", "http://[64:ff9b::7f00:1]/", "http://user:pw@example.com/", "http://0177.1/",
		"https://[fe80::1%25en0]/", "http://169.254.169.254./", "http://[2002:7f00:1::]/", "http://0x.0x.0/",
	} {
		f.Add(s)
	}
	p := fuzzPolicy()
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ValidateURL(raw, 0)
		if err != nil {
			if codeOf(t, err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		d, err := p.CheckURL(context.Background(), u)
		if err != nil {
			if codeOf(t, err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		checkAccepted(t, d)
		// Normalisation is stable: the normalised URL validates to itself.
		again, err := ValidateURL(d.URL.String(), 0)
		if err != nil || again.String() != d.URL.String() {
			t.Fatalf("%q normalised to %q, which revalidates to %v, %v", raw, d.URL, again, err)
		}
	})
}

func FuzzCheckRedirect(f *testing.F) {
	for _, s := range [][2]string{
		{"https://example.com/a", "/b"}, {"https://example.com/a", "https://127.0.0.1/"},
		{"http://8.8.8.8/", "http://134744072/x"}, {"http://[2606:4700::1]/", "//[::1]/"},
		{"http://example.com/", "http://example.com:80/../x"}, {"http://8.8.8.8/", "http://0x8.8.8.8/"},
	} {
		f.Add(s[0], s[1])
	}
	p := fuzzPolicy()
	f.Fuzz(func(t *testing.T, base, loc string) {
		from, err := ValidateURL(base, 0)
		if err != nil {
			return
		}
		to, err := CheckRedirect(from, loc, 0)
		if err != nil {
			if codeOf(t, err) == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !SameOrigin(from, to) {
			t.Fatalf("followed a cross-origin redirect %s → %s", from, to)
		}
		d, err := p.CheckURL(context.Background(), to)
		if err != nil {
			return
		}
		checkAccepted(t, d)
	})
}

func TestSameOrigin(t *testing.T) {
	mk := func(s string) *url.URL { u, _ := url.Parse(s); return u }
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"http://a.example/", "http://a.example:80/x", true},
		{"https://a.example/", "https://a.example:443/", true},
		{"http://a.example/", "https://a.example/", false},
		{"http://a.example/", "http://b.example/", false},
		{"http://a.example:81/", "http://a.example/", false},
	} {
		if got := SameOrigin(mk(tt.a), mk(tt.b)); got != tt.want {
			t.Errorf("SameOrigin(%s, %s) = %v", tt.a, tt.b, got)
		}
	}
}
