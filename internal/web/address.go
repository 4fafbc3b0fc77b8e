package web

import (
	"context"
	"fmt"
	"net/netip"
)

// This file classifies destination addresses. A fetch may only connect to
// a public unicast address: everything an operator would consider
// "inside" (loopback, RFC 1918, link-local, CGNAT, the ULA range) and
// everything that is not a real unicast destination (multicast,
// broadcast, reserved and documentation ranges) is refused. Addresses
// that carry an IPv4 address inside IPv6 (mapped, compatible, 6to4,
// Teredo and NAT64 forms) are judged by the IPv4 address they reach,
// because that is where a translator or the kernel sends the packets.

type ipRange struct {
	prefix netip.Prefix
	reason string
}

func r(prefix, reason string) ipRange {
	return ipRange{netip.MustParsePrefix(prefix), reason}
}

// ipv4Blocked lists the non-public IPv4 ranges, longest prefixes first
// where they nest so the most specific reason wins.
var ipv4Blocked = []ipRange{
	r("0.0.0.0/32", "unspecified"),
	r("0.0.0.0/8", `"this network"`),
	r("10.0.0.0/8", "private (RFC 1918)"),
	r("100.64.0.0/10", "shared address space (CGNAT, RFC 6598)"),
	r("127.0.0.0/8", "loopback"),
	r("169.254.0.0/16", "link-local"),
	r("172.16.0.0/12", "private (RFC 1918)"),
	r("192.0.0.0/24", "IETF protocol assignments"),
	r("192.0.2.0/24", "documentation (TEST-NET-1)"),
	r("192.88.99.0/24", "6to4 relay anycast"),
	r("192.168.0.0/16", "private (RFC 1918)"),
	r("198.18.0.0/15", "benchmarking"),
	r("198.51.100.0/24", "documentation (TEST-NET-2)"),
	r("203.0.113.0/24", "documentation (TEST-NET-3)"),
	r("224.0.0.0/4", "multicast"),
	r("255.255.255.255/32", "broadcast"),
	r("240.0.0.0/4", "reserved"),
}

// ipv6Blocked lists the non-public IPv6 ranges that carry no IPv4
// address. Anything outside 2000::/3 that is not listed among the
// IPv4-carrying forms is refused as well (see nonPublic6).
var ipv6Blocked = []ipRange{
	r("::/128", "unspecified"),
	r("::1/128", "loopback"),
	r("100::/64", "discard-only"),
	r("2001:2::/48", "benchmarking"),
	r("2001:10::/28", "ORCHID"),
	r("2001:db8::/32", "documentation"),
	r("3fff::/20", "documentation"),
	r("5f00::/16", "SRv6 SIDs"),
	r("fc00::/7", "unique local (ULA)"),
	r("fe80::/10", "link-local"),
	r("fec0::/10", "site-local"),
	r("ff00::/8", "multicast"),
}

// Prefixes of the IPv6 forms that carry an IPv4 address.
var (
	// NAT64WellKnown is the RFC 6052 well-known NAT64 prefix.
	NAT64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	// NAT64LocalUse is the RFC 8215 local-use NAT64 prefix.
	NAT64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48")
	ipv4Compatible = netip.MustParsePrefix("::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
	globalUnicast  = netip.MustParsePrefix("2000::/3")
)

// rfc6052Lengths are the prefix lengths RFC 6052 defines an IPv4
// embedding for.
var rfc6052Lengths = []int{96, 64, 56, 48, 40, 32}

// NonPublic returns why addr is not a public destination, or "" when it
// is one. dns64 lists the active DNS64 prefixes beyond the well-known
// one; an address inside one of them is refused when the IPv4 address it
// translates to is not public.
func NonPublic(addr netip.Addr, dns64 []netip.Prefix) string {
	if !addr.IsValid() {
		return "invalid address"
	}
	addr = addr.WithZone("")
	if addr.Is4In6() {
		if why := nonPublic4(addr.Unmap()); why != "" {
			return fmt.Sprintf("IPv4-mapped %s (%s)", addr.Unmap(), why)
		}
		return ""
	}
	if addr.Is4() {
		return nonPublic4(addr)
	}
	return nonPublic6(addr, dns64)
}

func nonPublic4(a netip.Addr) string {
	for _, b := range ipv4Blocked {
		if b.prefix.Contains(a) {
			return b.reason + " " + b.prefix.String()
		}
	}
	return ""
}

func nonPublic6(a netip.Addr, dns64 []netip.Prefix) string {
	for _, b := range ipv6Blocked {
		if b.prefix.Contains(a) {
			return b.reason + " " + b.prefix.String()
		}
	}
	b := a.As16()
	switch {
	case ipv4Compatible.Contains(a):
		return embedded(a, "IPv4-compatible", ipv4Compatible, netip.AddrFrom4([4]byte(b[12:16])))
	case NAT64WellKnown.Contains(a):
		return embedded(a, "NAT64", NAT64WellKnown, netip.AddrFrom4([4]byte(b[12:16])))
	case NAT64LocalUse.Contains(a):
		// The local-use prefix may be subdivided at any RFC 6052 length
		// from /48 on. An active DNS64 prefix inside it says which layout
		// the translator uses; without one the address is refused if any
		// layout it could be read with reaches a non-public IPv4 address
		// (/96 always applies, so at least one layout is checked).
		for _, p := range dns64 {
			if NAT64LocalUse.Contains(p.Addr()) && p.Bits() >= NAT64LocalUse.Bits() && p.Contains(a) {
				return dns64Verdict(a, p)
			}
		}
		for _, n := range rfc6052Lengths {
			if n < NAT64LocalUse.Bits() {
				continue
			}
			v4, ok := embeddedIPv4(a, n)
			if !ok {
				continue // a non-zero "u" octet rules this layout out
			}
			if why := embedded(a, "local-use NAT64", NAT64LocalUse, v4); why != "" {
				return why
			}
		}
		return ""
	case sixToFour.Contains(a):
		return embedded(a, "6to4", sixToFour, netip.AddrFrom4([4]byte(b[2:6])))
	case teredo.Contains(a):
		// RFC 4380: the client's IPv4 address is stored inverted.
		return embedded(a, "Teredo", teredo, netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	case !globalUnicast.Contains(a):
		return "reserved (outside 2000::/3)"
	}
	// Elsewhere an active DNS64 prefix only adds refusals: the address
	// already passed as public, and is refused if the translator would
	// carry it to a non-public IPv4 address.
	for _, p := range dns64 {
		if p.Contains(a) {
			if why := dns64Verdict(a, p); why != "" {
				return why
			}
		}
	}
	return ""
}

// dns64Verdict judges a, inside the active DNS64 prefix p, by the IPv4
// address p's layout embeds.
func dns64Verdict(a netip.Addr, p netip.Prefix) string {
	v4, ok := embeddedIPv4(a, p.Bits())
	if !ok {
		// An address in an active prefix that no RFC 6052 layout reads
		// is not something to guess about.
		return fmt.Sprintf("DNS64 prefix %s with no valid IPv4 embedding", p)
	}
	return embedded(a, "DNS64 prefix", p, v4)
}

// embedded explains a refusal of a that carries v4, or returns "" when v4
// is public.
func embedded(a netip.Addr, form string, p netip.Prefix, v4 netip.Addr) string {
	why := nonPublic4(v4)
	if why == "" {
		return ""
	}
	return fmt.Sprintf("%s %s translating to %s (%s)", form, p, v4, why)
}

// embeddedIPv4 reads the IPv4 address RFC 6052 embeds in a under a
// prefix of bits length. Bits 64–71 (the "u" octet) must be zero in every
// layout but /96.
func embeddedIPv4(a netip.Addr, bits int) (netip.Addr, bool) {
	b := a.As16()
	var v [4]byte
	switch bits {
	case 96:
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case 64:
		v = [4]byte{b[9], b[10], b[11], b[12]}
	case 56:
		v = [4]byte{b[7], b[9], b[10], b[11]}
	case 48:
		v = [4]byte{b[6], b[7], b[9], b[10]}
	case 40:
		v = [4]byte{b[5], b[6], b[7], b[9]}
	case 32:
		v = [4]byte{b[4], b[5], b[6], b[7]}
	default:
		return netip.Addr{}, false
	}
	if b[8] != 0 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(v), true
}

// DNS64DiscoveryHost is the RFC 7050 name whose synthesized AAAA answers
// reveal the network's DNS64 prefixes.
const DNS64DiscoveryHost = "ipv4only.arpa"

// The well-known IPv4 addresses of DNS64DiscoveryHost.
var dns64Sentinels = []netip.Addr{netip.MustParseAddr("192.0.0.170"), netip.MustParseAddr("192.0.0.171")}

// DetectDNS64 discovers the active DNS64 prefixes the RFC 7050 way:
// resolve DNS64DiscoveryHost through res and read, from every IPv6
// answer, the prefix that embeds one of its well-known IPv4 addresses.
// A network without DNS64 answers with IPv4 only (or not at all), which
// gives no prefixes.
func DetectDNS64(ctx context.Context, res Resolver) ([]netip.Prefix, error) {
	answers, err := res.LookupIPAddr(ctx, DNS64DiscoveryHost)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, ans := range answers {
		a, ok := netip.AddrFromSlice(ans.IP)
		if !ok || !a.Is6() || a.Is4In6() {
			continue
		}
		for _, n := range rfc6052Lengths {
			v4, ok := embeddedIPv4(a, n)
			if !ok || (v4 != dns64Sentinels[0] && v4 != dns64Sentinels[1]) {
				continue
			}
			p, _ := a.Prefix(n)
			if !containsPrefix(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func containsPrefix(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
