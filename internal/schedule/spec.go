// Package schedule defines scheduled runs (a prompt run in a fresh session
// on a cron expression, an interval or once at an instant), computes their
// fire times, and fires them through a Starter (dsh serve's session host).
// Schedules are stored in the store; what runs is derived from the host.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	// Embedded zone data: --tz must work on systems without tzdata.
	_ "time/tzdata"
)

// Kinds of schedule.
const (
	KindCron  = "cron"
	KindEvery = "every"
	KindAt    = "at"
)

// MinEvery is the shortest interval.
const MinEvery = time.Second

// Spec is when a schedule fires.
type Spec struct {
	Kind string `json:"kind"`
	// Cron is a five-field expression (minute hour day-of-month month
	// day-of-week), evaluated in TZ (default UTC).
	Cron string `json:"cron,omitempty"`
	TZ   string `json:"tz,omitempty"`
	// Every is an interval, fired from the schedule's creation.
	Every Duration `json:"every,omitempty"`
	// At is a single instant.
	At time.Time `json:"at,omitzero"`

	cron *cronExpr
	loc  *time.Location
}

// Duration is a time.Duration written as "30m" in JSON.
type Duration time.Duration

// MarshalJSON writes the duration's string form.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Compile validates s and prepares it for Next.
func (s *Spec) Compile() error {
	switch s.Kind {
	case KindCron:
		tz := s.TZ
		if tz == "" {
			tz = "UTC"
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return fmt.Errorf("time zone %q: %w", s.TZ, err)
		}
		c, err := parseCron(s.Cron)
		if err != nil {
			return err
		}
		s.cron, s.loc = c, loc
	case KindEvery:
		if time.Duration(s.Every) < MinEvery {
			return fmt.Errorf("interval %s is shorter than %s", time.Duration(s.Every), MinEvery)
		}
	case KindAt:
		if s.At.IsZero() {
			return errors.New("an at schedule needs a time")
		}
	default:
		return fmt.Errorf("unknown schedule kind %q", s.Kind)
	}
	return nil
}

// Skip is a local time that a cron schedule named but that did not exist
// (a daylight-saving gap), for the log.
type Skip struct {
	Local string
	Zone  string
}

// Next returns the first fire time strictly after t (ok false when there
// is none: an at schedule already past). anchor is when an every schedule
// counts from. skipped lists nonexistent local times passed over.
func (s *Spec) Next(t, anchor time.Time) (next time.Time, ok bool, skipped []Skip) {
	switch s.Kind {
	case KindAt:
		if s.At.After(t) {
			return s.At, true, nil
		}
		return time.Time{}, false, nil
	case KindEvery:
		d := time.Duration(s.Every)
		if t.Before(anchor) {
			return anchor.Add(d), true, nil
		}
		n := t.Sub(anchor)/d + 1
		return anchor.Add(n * d), true, nil
	case KindCron:
		return s.cron.next(t, s.loc)
	}
	return time.Time{}, false, nil
}

// cronExpr is a parsed five-field cron expression.
type cronExpr struct {
	minute, hour, dom, month, dow uint64
	domStar, dowStar              bool
}

var monthNames = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
var dayNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

func parseCron(expr string) (*cronExpr, error) {
	f := strings.Fields(expr)
	if len(f) != 5 {
		return nil, fmt.Errorf("cron %q: want five fields (minute hour day-of-month month day-of-week)", expr)
	}
	c := &cronExpr{}
	var err error
	parse := func(i, lo, hi int, names map[string]int) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = parseField(f[i], lo, hi, names)
		if err != nil {
			err = fmt.Errorf("cron %q: field %d (%s): %w", expr, i+1, f[i], err)
		}
		return v
	}
	c.minute = parse(0, 0, 59, nil)
	c.hour = parse(1, 0, 23, nil)
	c.dom = parse(2, 1, 31, nil)
	c.month = parse(3, 1, 12, monthNames)
	c.dow = parse(4, 0, 7, dayNames)
	if err != nil {
		return nil, err
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow |= 1
	}
	c.domStar, c.dowStar = f[2] == "*", f[4] == "*"
	return c, nil
}

func parseField(s string, lo, hi int, names map[string]int) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(s, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("bad step %q", stepS)
			}
			step = n
		}
		a, b := lo, hi
		if rng != "*" {
			as, bs, isRange := strings.Cut(rng, "-")
			var err error
			if a, err = value(as, names); err != nil {
				return 0, err
			}
			b = a
			if isRange {
				if b, err = value(bs, names); err != nil {
					return 0, err
				}
			} else if hasStep {
				b = hi
			}
		}
		if a < lo || b > hi || a > b {
			return 0, fmt.Errorf("%q is outside %d-%d", part, lo, hi)
		}
		for v := a; v <= b; v += step {
			bits |= 1 << uint(v)
			if step > b-v {
				break // v+step is past b (and may not fit in an int)
			}
		}
	}
	return bits, nil
}

func value(s string, names map[string]int) (int, error) {
	if v, ok := names[strings.ToLower(s)]; ok {
		return v, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return n, nil
}

func (c *cronExpr) dayMatches(y int, m time.Month, d int, loc *time.Location) bool {
	if c.month&(1<<uint(m)) == 0 {
		return false
	}
	wd := time.Date(y, m, d, 12, 0, 0, 0, loc).Weekday()
	domOK := c.dom&(1<<uint(d)) != 0
	dowOK := c.dow&(1<<uint(wd)) != 0
	// Cron's rule: when both day fields are restricted, either matches.
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return dowOK
	case c.dowStar:
		return domOK
	}
	return domOK || dowOK
}

// next walks local days, then the hours and minutes the expression names,
// and converts each local time to an instant. A local time in a DST gap
// does not exist: it is skipped (reported). A local time that occurs twice
// (the fall-back hour) fires once, at its first occurrence.
func (c *cronExpr) next(t time.Time, loc *time.Location) (time.Time, bool, []Skip) {
	var skipped []Skip
	lt := t.In(loc)
	day := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, time.UTC)
	for i := 0; i < 366*5; i++ {
		d := day.AddDate(0, 0, i)
		y, m, dd := d.Date()
		if !c.dayMatches(y, m, dd, loc) {
			continue
		}
		for h := 0; h < 24; h++ {
			if c.hour&(1<<uint(h)) == 0 {
				continue
			}
			for mi := 0; mi < 60; mi++ {
				if c.minute&(1<<uint(mi)) == 0 {
					continue
				}
				at, exists := localInstant(y, m, dd, h, mi, loc)
				if !exists {
					if at.After(t) {
						skipped = append(skipped, Skip{Local: fmt.Sprintf("%04d-%02d-%02d %02d:%02d", y, m, dd, h, mi), Zone: loc.String()})
					}
					continue
				}
				if at.After(t) {
					return at, true, skipped
				}
			}
		}
	}
	return time.Time{}, false, skipped
}

// localInstant is the first instant whose wall clock in loc reads the
// given time; exists is false in a DST gap.
func localInstant(y int, m time.Month, d, h, mi int, loc *time.Location) (time.Time, bool) {
	at := time.Date(y, m, d, h, mi, 0, 0, loc)
	if at.Hour() != h || at.Minute() != mi || at.Day() != d {
		return at, false
	}
	// In a repeated hour Go may pick either instant: take the earlier.
	for _, back := range []time.Duration{time.Hour, 30 * time.Minute} {
		e := at.Add(-back)
		if e.Hour() == h && e.Minute() == mi && e.Day() == d {
			return e, true
		}
	}
	return at, true
}
