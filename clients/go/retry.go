package sessiontodo

import (
	"context"
	"math/rand"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RetryPolicy is the one retry policy of sessiontodo's clients: up to Attempts tries of a call that
// failed with UNAVAILABLE (it never reached a server that could act on it), full-jitter delays
// capped at Initial doubling to Maximum, and no new try after the call's deadline. Other codes
// (DEADLINE_EXCEEDED and UNKNOWN among them: the write may have happened) are returned at once.
type RetryPolicy struct {
	Attempts int
	Initial  time.Duration
	Maximum  time.Duration
}

// DefaultRetry is the Python and TypeScript clients' policy.
var DefaultRetry = RetryPolicy{Attempts: 5, Initial: 100 * time.Millisecond, Maximum: 2 * time.Second}

// delay is the wait after failed try number attempt (from 0): uniform up to its cap.
func (p RetryPolicy) delay(attempt int) time.Duration {
	limit := p.Maximum
	if attempt < 30 && p.Initial<<attempt < limit {
		limit = p.Initial << attempt
	}
	return time.Duration(rand.Int63n(int64(limit) + 1))
}

// run calls call until it succeeds, fails for good, or the attempts or ctx run out.
func (p RetryPolicy) run(ctx context.Context, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		if err == nil || status.Code(err) != codes.Unavailable || attempt+1 >= p.Attempts {
			return err
		}
		timer := time.NewTimer(p.delay(attempt))
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}
