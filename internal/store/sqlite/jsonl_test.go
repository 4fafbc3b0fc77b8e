package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-dev/dsh/internal/session"
)

func exportString(t testing.TB, s *Store, id string) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.Export(context.Background(), id, &b); err != nil {
		t.Fatalf("Export %s: %v", id, err)
	}
	return b.String()
}

func TestExportImportRoundTrip(t *testing.T) {
	ctx := context.Background()
	src, _ := newStore(t)
	h := hdr("s")
	h.Origin, h.AgentPreset, h.ParentSession = "subagent", "coder", "root"
	if err := src.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	log := simpleLog(t)
	// A line far beyond bufio's default 64 KiB token size must import.
	big, _ := json.Marshal(map[string]string{"s": "\u2028<&>", "big": strings.Repeat("y", 256<<10)})
	future := session.Event{Type: "plugin/x", Seq: 7, Time: 9, Ignorable: true, Data: big}
	crash := crashedLog(t)
	for i := range crash {
		crash[i].Seq += 8
	}
	mustAppend(t, src, "s", append(append(log, future), crash...)...)

	out := exportString(t, src, "s")
	if n := rowCount(t, src, "s"); n != 13 {
		t.Fatalf("Export wrote: rows = %d", n)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !strings.HasPrefix(lines[0], `{"type":"session","version":0,"id":"s",`) {
		t.Fatalf("header line = %s", lines[0])
	}
	// Exported balanced: 13 stored events plus 5 closers (a tool/call and
	// result for the call that never started).
	if len(lines) != 1+18 {
		t.Fatalf("export has %d lines", len(lines))
	}

	dst, _ := newStore(t)
	gotH, err := dst.Import(ctx, strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotH, h) {
		t.Fatalf("imported header = %+v", gotH)
	}
	if again := exportString(t, dst, "s"); again != out {
		t.Fatalf("round trip differs:\n%s\n---\n%s", out, again)
	}
	_, a, _ := src.Inspect(ctx, "s")
	_, b, _ := dst.Load(ctx, "s")
	if !reflect.DeepEqual(a, b) {
		t.Fatal("imported events differ")
	}
	if _, err := dst.Import(ctx, strings.NewReader(out)); !errors.Is(err, ErrExists) {
		t.Fatalf("second Import = %v", err)
	}
	// An empty session round-trips too.
	mustCreate(t, src, "empty")
	out = exportString(t, src, "empty")
	if _, err := dst.Import(ctx, strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	if again := exportString(t, dst, "empty"); again != out {
		t.Fatalf("empty round trip: %q vs %q", out, again)
	}
}

func TestImportRejectsWithoutWriting(t *testing.T) {
	ctx := context.Background()
	src, _ := newStore(t)
	mustCreate(t, src, "s")
	mustAppend(t, src, "s", simpleLog(t)...)
	good := strings.Split(exportString(t, src, "s"), "\n")
	head, events := good[0], good[1:len(good)-1]
	join := func(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
	withEvents := func(evs ...string) string { return join(append([]string{head}, evs...)...) }

	cases := map[string]string{
		"empty input":     "",
		"header not JSON": join("{oops", events[0]),
		"header wrong type": join(strings.Replace(head, `"type":"session"`, `"type":"turn/start"`, 1),
			events[0]),
		"header version": join(strings.Replace(head, `"version":0`, `"version":1`, 1)),
		"header no id":   join(strings.Replace(head, `"id":"s"`, `"id":""`, 1)),
		"header dup key": join(strings.Replace(head, `{`, `{"id":"t",`, 1)),
		"header array":   join(`[1,2]`),
		"seq gap":        withEvents(events[0], events[1], events[3]),
		"seq not from 0": withEvents(events[1:]...),
		"malformed line": withEvents(events[0], `{"type":"turn/start","seq":1,`),
		"blank line":     withEvents(events[0], "", events[1]),
		"unknown type":   withEvents(events[0], `{"type":"future/x","seq":1,"time":1,"data":{}}`),
		"lossy data":     withEvents(events[0], `{"type":"turn/start","seq":1,"time":1,"data":{"turn":1,"turn":2}}`),
		"dup envelope":   withEvents(events[0], `{"type":"turn/start","seq":1,"seq":1,"time":1,"data":{}}`),
		"no surface op":  withEvents(`{"type":"user/message","seq":0,"time":1,"data":{}}`),
		"too long line":  withEvents(`{"type":"turn/start","seq":0,"time":1,"data":"` + strings.Repeat("x", 1<<20) + `"}`),
	}
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 1 << 20
	dst, _ := newStore(t)
	for name, in := range cases {
		if _, err := dst.Import(ctx, strings.NewReader(in)); err == nil {
			t.Errorf("%s: Import succeeded", name)
		} else if name != "too long line" && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error %v does not wrap ErrCorrupt", name, err)
		}
	}
	if list, err := dst.List(ctx, ListFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("rejected imports wrote %d sessions, %v", len(list), err)
	}
	var n int64
	if err := dst.r.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rejected imports wrote %d events, %v", n, err)
	}
	// An id that already exists is refused without touching it.
	if _, err := src.Import(ctx, strings.NewReader(withEvents(events[0]))); !errors.Is(err, ErrExists) {
		t.Fatalf("Import over existing id = %v", err)
	}
	if n := rowCount(t, src, "s"); n != int64(len(events)) {
		t.Fatalf("existing session has %d rows", n)
	}
}

// FuzzImport feeds arbitrary input to Import: it must never panic, and
// whatever it accepts must load and export back to an importable form.
func FuzzImport(f *testing.F) {
	src, _ := newStore(f)
	mustCreate(f, src, "s")
	mustAppend(f, src, "s", crashedLog(f)...)
	valid := exportString(f, src, "s")
	f.Add(valid)
	f.Add(strings.SplitN(valid, "\n", 2)[0])
	f.Add(`{"type":"session","version":0,"id":"x","createdAt":1,"cwd":"/","delegationDepth":0}` + "\n" +
		`{"type":"a/b","seq":0,"time":0,"data":{},"ignorable":true}`)
	f.Add("")
	f.Add("\n\n")
	f.Add(`{"type":"session","version":0,"id":"y"}` + "\n" + `{"type":"user/message","seq":0,"time":0,"data":null,"surfaceOp":{"op":"replace","start":0,"end":0}}`)

	dst, _ := newStore(f)
	f.Fuzz(func(t *testing.T, in string) {
		ctx := context.Background()
		h, err := dst.Import(ctx, strings.NewReader(in))
		if err != nil {
			return
		}
		if _, _, err := dst.Inspect(ctx, h.ID); err != nil {
			t.Fatalf("imported session does not read back: %v", err)
		}
		var b bytes.Buffer
		if err := dst.Export(ctx, h.ID, &b); err != nil {
			t.Fatalf("imported session does not export: %v", err)
		}
		if _, _, err := parseJSONL(&b); err != nil {
			t.Fatalf("export of an imported session does not parse: %v", err)
		}
	})
}
