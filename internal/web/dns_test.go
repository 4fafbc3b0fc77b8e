package web

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// dnsServer is a minimal authoritative A/AAAA responder on loopback UDP,
// so the policy is exercised through Go's real DNS client, not only a
// fake resolver. A name may have several answer sets: the n-th query of
// a type gets set n (the last repeats), which models rebinding.
type dnsServer struct {
	pc      net.PacketConn
	mu      sync.Mutex
	records map[string][][]string
	queries map[string]int // "name/A", "name/AAAA"
}

const (
	typeA    = 1
	typeAAAA = 28
)

func startDNS(t *testing.T) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{pc: pc, records: map[string][][]string{}, queries: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serve()
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return s
}

func (s *dnsServer) set(name string, sets ...[]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[name] = sets
}

func (s *dnsServer) count(name string, qtype uint16) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[fmt.Sprintf("%s/%d", name, qtype)]
}

// resolver returns a pure-Go resolver whose every query goes to s.
func (s *dnsServer) resolver() *net.Resolver {
	addr := s.pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		if resp, ok := s.answer(buf[:n]); ok {
			_, _ = s.pc.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query: the question echoed, then one
// record per address of the asked type; NXDOMAIN for unknown names.
func (s *dnsServer) answer(q []byte) ([]byte, bool) {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil, false
	}
	var labels []string
	off := 12
	for {
		if off >= len(q) {
			return nil, false
		}
		l := int(q[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(q) {
			return nil, false
		}
		labels = append(labels, string(q[off:off+l]))
		off += l
	}
	if off+4 > len(q) {
		return nil, false
	}
	qtype := binary.BigEndian.Uint16(q[off : off+2])
	question := q[12 : off+4]
	name := strings.ToLower(strings.Join(labels, "."))

	s.mu.Lock()
	key := fmt.Sprintf("%s/%d", name, qtype)
	nth := s.queries[key]
	s.queries[key]++
	sets, known := s.records[name]
	s.mu.Unlock()

	var rdata [][]byte
	if known && len(sets) > 0 {
		for _, a := range sets[min(nth, len(sets)-1)] {
			addr := netip.MustParseAddr(a)
			switch {
			case qtype == typeA && addr.Is4():
				b := addr.As4()
				rdata = append(rdata, b[:])
			case qtype == typeAAAA && addr.Is6():
				b := addr.As16()
				rdata = append(rdata, b[:])
			}
		}
	}
	resp := make([]byte, 12, 512)
	copy(resp[0:2], q[0:2])    // id
	resp[2] = 0x84 | q[2]&0x01 // QR, AA, RD echoed
	resp[3] = 0x80             // RA
	if !known {
		resp[3] |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(resp[4:6], 1)
	binary.BigEndian.PutUint16(resp[6:8], uint16(len(rdata)))
	resp = append(resp, question...)
	for _, rd := range rdata {
		resp = append(resp, 0xc0, 0x0c) // pointer to the question name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // IN
		resp = binary.BigEndian.AppendUint32(resp, 0) // TTL
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(rd)))
		resp = append(resp, rd...)
	}
	return resp, true
}

func TestRealDNSNonPublicAnswers(t *testing.T) {
	dns := startDNS(t)
	p := &Policy{Resolver: dns.resolver()}
	for i, c := range nonPublicCases {
		name := fmt.Sprintf("np%d.test", i)
		dns.set(name, []string{c.addr})
		_, err := p.Check(context.Background(), "http://"+name+"/")
		e := wantCode(t, err, CodeDestinationBlocked)
		if !strings.Contains(e.Reason, c.reason) || e.Host != name {
			t.Errorf("%s → %s: host %q reason %q, want %q", name, c.addr, e.Host, e.Reason, c.reason)
		}
	}
}

func TestRealDNS(t *testing.T) {
	dns := startDNS(t)
	dns.set("public.test", []string{publicIP, "2606:4700:4700::1111"})
	dns.set("mixed.test", []string{publicIP, "10.0.0.1"})
	dns.set("mixed6.test", []string{publicIP, "fe80::1"})
	dns.set(DNS64DiscoveryHost, []string{"192.0.0.170", "2600:64::c000:aa"})
	dns.set("nat64-private.test", []string{"2600:64::a00:1"})
	dns.set("nat64-public.test", []string{"2600:64::808:808"})
	p := &Policy{Resolver: dns.resolver()}
	tests := []struct {
		host, want, reason string
	}{
		{"public.test", "", ""},
		{"mixed.test", CodeDestinationBlocked, "private"},
		{"mixed6.test", CodeDestinationBlocked, "link-local"},
		{"nat64-private.test", CodeDestinationBlocked, "DNS64 prefix 2600:64::/96 translating to 10.0.0.1"},
		{"nat64-public.test", "", ""},
		{"unknown.test", CodeProviderError, ""},
	}
	for _, tt := range tests {
		d, err := p.Check(context.Background(), "http://"+tt.host+"/")
		if tt.want == "" {
			if err != nil || len(d.Addrs) == 0 {
				t.Errorf("%s: %v", tt.host, err)
			}
			continue
		}
		e := wantCode(t, err, tt.want)
		contains(t, e.Reason, tt.reason)
	}
	// DNS64 detection asked the same server.
	if dns.count(DNS64DiscoveryHost, typeAAAA) == 0 {
		t.Fatal("DNS64 detection did not query ipv4only.arpa")
	}
}

// TestRealDNSRebindingIsPinned resolves through real DNS a name whose
// answer turns private on the second lookup: the fetch must resolve once
// and connect to the first, validated answer only.
func TestRealDNSRebindingIsPinned(t *testing.T) {
	dns := startDNS(t)
	dns.set("rebind.test", []string{publicIP}, []string{"127.0.0.1"})
	_, dialer := fixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "pinned")
	}))
	f := NewHTTPFetcher(HTTPOptions{Policy: Policy{Resolver: dns.resolver(), DetectDNS64: noDNS64}, Dial: dialer.Dial})
	res, err := f.Fetch(context.Background(), FetchRequest{URL: "http://rebind.test/"})
	if err != nil || res.Content != "pinned" {
		t.Fatalf("%+v %v", res, err)
	}
	if n := dns.count("rebind.test", typeA); n != 1 {
		t.Fatalf("rebind.test was queried %d times for A, want once", n)
	}
	if got := dialer.addrs(); len(got) != 1 || got[0] != publicIP+":80" {
		t.Fatalf("dialled %v, want only the validated %s:80", got, publicIP)
	}
	// The next request resolves afresh, sees the private answer and is
	// refused before any connection.
	_, err = f.Fetch(context.Background(), FetchRequest{URL: "http://rebind.test/"})
	wantCode(t, err, CodeDestinationBlocked)
	if got := dialer.addrs(); len(got) != 1 {
		t.Fatalf("dialled %v after a refused request", got)
	}
}

func TestRealDNSCancelled(t *testing.T) {
	dns := startDNS(t)
	dns.set("slow.test", []string{publicIP})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &Policy{Resolver: dns.resolver()}
	_, err := p.Check(ctx, "http://slow.test/")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the context's error for the fetcher to classify", err)
	}
}
