package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-dev/dsh/internal/session"
	"github.com/dsh-dev/dsh/internal/store/sqlite"
	"github.com/dsh-dev/dsh/internal/subagent"
	"github.com/dsh-dev/dsh/internal/subagent/catalog"
)

// Shape of the listing benchmark's tree: one root, listChildren children,
// each with listGrandchildren children: 1 + 99 + 99×100 = 10,000 stored
// sessions.
const (
	listChildren      = 99
	listGrandchildren = 100
)

// BenchmarkListDescendants10k lists a stored tree of 10,000 sessions cold
// (nothing live): one Inspect and one catalog fold per session, at the
// listing's default concurrency and serially.
func BenchmarkListDescendants10k(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "dsh.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	t0 := time.Now()
	storeTree(b, st)
	b.Logf("stored %d sessions in %v", 1+listChildren*(1+listGrandchildren), time.Since(t0).Round(time.Millisecond))
	const wantRows = listChildren * (1 + listGrandchildren)
	for _, conc := range []int{catalog.DefaultConcurrency, 1} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			deps := catalog.Deps{Store: st, Concurrency: conc}
			for b.Loop() {
				rows, err := catalog.ListDescendants(ctx, deps, "root")
				if err != nil {
					b.Fatal(err)
				}
				if len(rows) != wantRows {
					b.Fatalf("%d rows, want %d", len(rows), wantRows)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/listing")
		})
	}
}

// storeTree writes the tree straight through the store, each session as
// the service and a provider leave it: a child's log holds its
// descriptor, a parent's one subagent/start per child.
func storeTree(b *testing.B, st *sqlite.Store) {
	ctx := context.Background()
	create := func(id, parent string, depth int, children []string) {
		h := session.Header{Version: session.FormatVersion, ID: id, CreatedAt: 1_700_000_000_000, Cwd: "/work", DelegationDepth: depth}
		var events []session.Event
		add := func(typ string, data any) {
			raw, err := json.Marshal(data)
			if err != nil {
				b.Fatal(err)
			}
			n := int64(len(events))
			events = append(events, session.Event{Type: typ, Seq: n, Time: h.CreatedAt + n, Data: raw})
		}
		if parent != "" {
			h.ParentSession, h.Origin = parent, "subagent"
			add(session.TypeSubagentDescriptor, subagent.Descriptor{Version: subagent.DescriptorVersion, Mode: subagent.ModeOneShot, Provider: subagent.ProviderSpawn})
		}
		for _, c := range children {
			add(session.TypeSubagentStart, subagent.StartEvent{
				RunID: "run-" + c, ChildID: c, Provider: subagent.ProviderSpawn, Label: "task " + c, Mode: subagent.ModeOneShot, Depth: depth + 1,
			})
		}
		if err := st.Create(ctx, h); err != nil {
			b.Fatal(err)
		}
		if err := st.Append(ctx, id, events); err != nil {
			b.Fatal(err)
		}
	}
	kids := make([]string, listChildren)
	for i := range kids {
		kids[i] = fmt.Sprintf("child-%02d", i)
	}
	create("root", "", 0, kids)
	for _, k := range kids {
		grand := make([]string, listGrandchildren)
		for j := range grand {
			grand[j] = fmt.Sprintf("%s-%03d", k, j)
		}
		create(k, "root", 1, grand)
		for _, g := range grand {
			create(g, k, 2, nil)
		}
	}
}
