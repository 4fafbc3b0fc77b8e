package host_test

import (
	"slices"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
)

// TestListPage: a listing walked page by page with each page's Next is
// the whole listing, once each, with the live overlay on every page; the
// last page has no Next; a bad cursor or limit is INVALID_ARGUMENT.
func TestListPage(t *testing.T) {
	f := newFixture(t, host.Config{})
	for range 5 {
		f.create(host.CreateRequest{})
	}
	whole, err := f.h.List(t.Context(), host.ListFilter{Cwd: f.cwd})
	if err != nil || len(whole) != 5 {
		t.Fatalf("%d sessions, %v", len(whole), err)
	}
	for _, size := range []int{1, 2, 5, 6} {
		var walked []string
		fl := host.ListFilter{Cwd: f.cwd, Limit: size}
		for pages := 0; ; pages++ {
			if pages > 6 {
				t.Fatalf("limit %d: no end after %d pages", size, pages)
			}
			p, err := f.h.ListPage(t.Context(), fl)
			if err != nil || len(p.Sessions) > size {
				t.Fatalf("limit %d: page of %d, %v", size, len(p.Sessions), err)
			}
			for _, in := range p.Sessions {
				if !in.Live || in.Status != host.StatusIdle {
					t.Fatalf("no live overlay on a page: %+v", in)
				}
				walked = append(walked, in.Header.ID)
			}
			if p.Next == "" {
				break
			}
			fl.Before = p.Next
		}
		want := make([]string, len(whole))
		for i, in := range whole {
			want[i] = in.Header.ID
		}
		if !slices.Equal(walked, want) {
			t.Fatalf("limit %d: walked %v, want %v", size, walked, want)
		}
	}
	for _, fl := range []host.ListFilter{{Before: "not a cursor!"}, {Before: "eA"}, {Limit: -1}} {
		if _, err := f.h.ListPage(t.Context(), fl); host.ErrorCode(err) != host.CodeInvalidArgument {
			t.Errorf("%+v: %v, want %s", fl, err, host.CodeInvalidArgument)
		}
	}
}
