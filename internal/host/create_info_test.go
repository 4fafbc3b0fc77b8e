package host_test

import (
	"reflect"
	"testing"

	"github.com/dsh-dev/dsh/internal/host"
)

// TestCreateInfoIsTheStoredOne checks that the Info Create returns
// without reading the store (for an untitled session) is what reading it
// back gives, but for UpdatedAt: Create reports the creation time; the
// row's own is written a moment later.
func TestCreateInfoIsTheStoredOne(t *testing.T) {
	f := newFixture(t, host.Config{})
	for _, r := range []host.CreateRequest{{}, {Title: "named"}} {
		got := f.create(r)
		want, err := f.h.Get(t.Context(), got.Header.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.UpdatedAt > want.UpdatedAt || want.UpdatedAt-got.UpdatedAt > 60_000 {
			t.Errorf("title %q: UpdatedAt %d, stored %d", r.Title, got.UpdatedAt, want.UpdatedAt)
		}
		got.UpdatedAt = want.UpdatedAt
		if !reflect.DeepEqual(got, want) {
			t.Errorf("title %q: Create returned\n%+v\nthe store has\n%+v", r.Title, got, want)
		}
	}
}
