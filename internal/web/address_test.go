package web

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// nonPublicCases is every non-public range the policy refuses, as
// addresses, with a word its reason must contain. The DNS tests serve
// the same table as real DNS answers.
var nonPublicCases = []struct {
	addr, reason string
}{
	{"0.0.0.0", "unspecified"},
	{"0.1.2.3", "this network"},
	{"10.0.0.1", "private"},
	{"10.255.255.255", "private"},
	{"100.64.0.1", "CGNAT"},
	{"100.127.255.254", "CGNAT"},
	{"127.0.0.1", "loopback"},
	{"127.255.255.254", "loopback"},
	{"169.254.169.254", "link-local"},
	{"172.16.0.1", "private"},
	{"172.31.255.255", "private"},
	{"192.0.0.170", "IETF"},
	{"192.0.2.1", "documentation"},
	{"192.88.99.1", "6to4 relay"},
	{"192.168.1.1", "private"},
	{"198.18.0.1", "benchmarking"},
	{"198.19.255.255", "benchmarking"},
	{"198.51.100.7", "documentation"},
	{"203.0.113.9", "documentation"},
	{"224.0.0.1", "multicast"},
	{"239.255.255.250", "multicast"},
	{"240.0.0.1", "reserved"},
	{"255.255.255.255", "broadcast"},
	{"::", "unspecified"},
	{"::1", "loopback"},
	{"::ffff:127.0.0.1", "loopback"},
	{"::ffff:10.1.2.3", "private"},
	{"::ffff:169.254.169.254", "link-local"},
	{"::127.0.0.1", "IPv4-compatible"},
	{"::10.0.0.1", "IPv4-compatible"},
	{"64:ff9b::7f00:1", "NAT64"},
	{"64:ff9b::a9fe:a9fe", "NAT64"},
	{"64:ff9b::c0a8:101", "NAT64"},
	{"64:ff9b:1::a00:1", "local-use NAT64"},
	{"64:ff9b:1:a00:1::", "local-use NAT64"},
	// Without an active prefix saying which layout applies, a local-use
	// address is refused if any layout reads a non-public IPv4 address.
	{"64:ff9b:1::808:808", "local-use NAT64"},
	{"100::1", "discard"},
	{"2001:2::1", "benchmarking"},
	{"2001:db8::1", "documentation"},
	{"2001:10::1", "ORCHID"},
	{"2002:7f00:1::", "6to4"},
	{"2002:c0a8:101::1", "6to4"},
	{"2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo"}, // client 127.0.0.1
	{"3fff::1", "documentation"},
	{"5f00::1", "SRv6"},
	{"fc00::1", "unique local"},
	{"fd12:3456:789a::1", "unique local"},
	{"fe80::1", "link-local"},
	{"febf::1", "link-local"},
	{"fec0::1", "site-local"},
	{"ff02::1", "multicast"},
	{"ff05::2", "multicast"},
	{"4000::1", "reserved"},
	{"::2", "IPv4-compatible"},
}

var publicCases = []string{
	"1.1.1.1", "8.8.8.8", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
	"192.0.1.255", "192.169.0.0", "198.17.255.255", "198.20.0.0", "223.255.255.255",
	"2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808",
	"2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", // Teredo client 8.8.8.8
}

func TestNonPublic(t *testing.T) {
	for _, c := range nonPublicCases {
		why := NonPublic(netip.MustParseAddr(c.addr), nil)
		if why == "" || !strings.Contains(why, c.reason) {
			t.Errorf("NonPublic(%s) = %q, want a reason with %q", c.addr, why, c.reason)
		}
	}
	for _, a := range publicCases {
		if why := NonPublic(netip.MustParseAddr(a), nil); why != "" {
			t.Errorf("NonPublic(%s) = %q, want public", a, why)
		}
	}
	if NonPublic(netip.Addr{}, nil) == "" {
		t.Error("the zero Addr must not be public")
	}
	if why := NonPublic(netip.MustParseAddr("fe80::1%eth0"), nil); !strings.Contains(why, "link-local") {
		t.Errorf("zoned link-local: %q", why)
	}
}

func TestNonPublicDNS64Prefixes(t *testing.T) {
	p96 := netip.MustParsePrefix("2600:64::/96")
	p64 := netip.MustParsePrefix("2600:64:0:1::/64")
	p48 := netip.MustParsePrefix("2600:65::/48")
	odd := netip.MustParsePrefix("2600:66::/100")
	local96 := netip.MustParsePrefix("64:ff9b:1::/96")
	tests := []struct {
		addr   string
		prefix []netip.Prefix
		want   string // "" public, else a word of the reason
	}{
		{"2600:64::a00:1", []netip.Prefix{p96}, "10.0.0.1"},
		{"2600:64::808:808", []netip.Prefix{p96}, ""},
		{"2600:64::a00:1", nil, ""}, // no active prefix: an ordinary public address
		// /64 layout: IPv4 in bytes 9–12, byte 8 zero.
		{"2600:64:0:1:7f:0:100:0", []netip.Prefix{p64}, "127.0.0.1"},
		{"2600:64:0:1:8:808:800::", []netip.Prefix{p64}, ""},
		{"2600:64:0:1:ff7f:0:1::", []netip.Prefix{p64}, "no valid IPv4 embedding"},
		// /48 layout: bytes 6–7 and 9–10.
		{"2600:65:0:c0a8:1:100::", []netip.Prefix{p48}, "192.168.1.1"},
		{"2600:66::1", []netip.Prefix{odd}, "no valid IPv4 embedding"},
		// An active local-use prefix fixes the layout.
		{"64:ff9b:1::808:808", []netip.Prefix{local96}, ""},
		{"64:ff9b:1::a00:1", []netip.Prefix{local96}, "10.0.0.1"},
		// Outside the local-use range a prefix cannot make a blocked
		// address public.
		{"fd00::808:808", []netip.Prefix{netip.MustParsePrefix("fd00::/96")}, "unique local"},
	}
	for _, tt := range tests {
		why := NonPublic(netip.MustParseAddr(tt.addr), tt.prefix)
		if (tt.want == "") != (why == "") || !strings.Contains(why, tt.want) {
			t.Errorf("NonPublic(%s, %v) = %q, want %q", tt.addr, tt.prefix, why, tt.want)
		}
	}
}

func TestEmbeddedIPv4Layouts(t *testing.T) {
	// RFC 6052 section 2.4 examples: 192.0.2.33 under each prefix length.
	for bits, addr := range map[int]string{
		32: "2001:db8:c000:221::",
		40: "2001:db8:1c0:2:21::",
		48: "2001:db8:122:c000:2:2100::",
		56: "2001:db8:122:3c0:0:221::",
		64: "2001:db8:122:344:c0:2:2100:0",
		96: "2001:db8:122:344::192.0.2.33",
	} {
		got, ok := embeddedIPv4(netip.MustParseAddr(addr), bits)
		if !ok || got != netip.MustParseAddr("192.0.2.33") {
			t.Errorf("/%d %s: %v %v", bits, addr, got, ok)
		}
	}
}

func TestDetectDNS64(t *testing.T) {
	tests := []struct {
		name    string
		answers []string
		want    []string
	}{
		{"well-known prefix", []string{"64:ff9b::c000:aa", "64:ff9b::c000:ab"}, []string{"64:ff9b::/96"}},
		{"network-specific /96", []string{"2600:64::192.0.0.170"}, []string{"2600:64::/96"}},
		{"network-specific /64", []string{"2600:64:0:1:c0:0:aa00:0"}, []string{"2600:64:0:1::/64"}},
		{"no DNS64: IPv4 answers only", []string{"192.0.0.170", "192.0.0.171"}, nil},
		{"IPv6 answer without the sentinel", []string{"2600:64::1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := newResolver(map[string][]string{DNS64DiscoveryHost: tt.answers})
			got, err := DetectDNS64(context.Background(), res)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if strings.Join(s, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("got %v, want %v", s, tt.want)
			}
		})
	}
	if _, err := DetectDNS64(context.Background(), newResolver(nil)); err == nil {
		t.Fatal("NXDOMAIN must be reported to the caller, which treats it as no DNS64")
	}
}
