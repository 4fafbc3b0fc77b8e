package llm

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy decides whether and when a failed model call is retried.
// The zero value never retries; [DefaultRetryPolicy] is what providers use.
type RetryPolicy struct {
	MaxRetries int
	BaseDelay  time.Duration
	MaxDelay   time.Duration
	// Jitter is the fraction (0..1) of random spread applied to each delay.
	Jitter float64
	// Codes lists the retryable failure codes.
	Codes []Code
}

// DefaultRetryPolicy retries transient failures 5 times with exponential
// backoff from 500 ms to 10 s and 10% jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxRetries: 5,
		BaseDelay:  500 * time.Millisecond,
		MaxDelay:   10 * time.Second,
		Jitter:     0.1,
		Codes:      []Code{CodeEmptyResponse, CodeRateLimit, CodeServer, CodeTimeout, CodeTransport},
	}
}

// Delay returns the wait before retry number n (1-based) of failure f, and
// false when the policy does not retry it. A provider Retry-After wins over
// the computed backoff when it is not longer than MaxDelay.
func (p RetryPolicy) Delay(n int, f *Failure) (time.Duration, bool) {
	if f == nil || n > p.MaxRetries {
		return 0, false
	}
	ok := false
	for _, c := range p.Codes {
		if c == f.Code {
			ok = true
			break
		}
	}
	if !ok {
		return 0, false
	}
	if ra := f.RetryAfter(); ra > 0 && ra <= p.MaxDelay {
		return ra, true
	}
	d := p.BaseDelay << (n - 1)
	if d > p.MaxDelay || d <= 0 {
		d = p.MaxDelay
	}
	if p.Jitter > 0 {
		spread := float64(d) * p.Jitter
		d += time.Duration((rand.Float64()*2 - 1) * spread)
	}
	return d, true
}
