package concord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"go.concord.dev/concord"
	ratelimitv1 "go.concord.dev/concord/gen/concord/ratelimit/v1"
)

// The rate limit service through the client's stub: Check takes units and says how
// long to wait; Wait blocks in the server until they pass; a limit that disagrees
// with the stored one is ErrRateLimitMismatch.
func TestRateLimitCheckAndWait(t *testing.T) {
	t.Parallel()
	c, key := connect(t), unique(t)
	ctx := within(t, 20*time.Second)
	limit := &ratelimitv1.Limit{Rate: 5, Period: durationpb.New(time.Second), Burst: 1}
	first, err := c.RateLimits.Check(ctx, &ratelimitv1.CheckRequest{Key: key, Limit: limit, Hits: 1})
	if err != nil || !first.GetAllowed() {
		t.Fatalf("first check: want allowed, got %v, %v", first, err)
	}
	refused, err := c.RateLimits.Check(ctx, &ratelimitv1.CheckRequest{Key: key, Limit: limit, Hits: 1})
	if err != nil || refused.GetAllowed() || refused.GetRetryAfter().AsDuration() <= 0 {
		t.Fatalf("second check: want refused with a retry_after, got %v, %v", refused, err)
	}
	waited, err := c.RateLimits.Wait(ctx, &ratelimitv1.WaitRequest{Key: key, Limit: limit, Hits: 1,
		WaitTimeout: durationpb.New(5 * time.Second)})
	if err != nil || !waited.GetAllowed() {
		t.Fatalf("Wait: want allowed once the limit allows, got %v, %v", waited, err)
	}
	if _, err := c.RateLimits.SetLimit(ctx, &ratelimitv1.SetLimitRequest{Key: key, Limit: limit}); err != nil {
		t.Fatal(err)
	}
	other := &ratelimitv1.Limit{Rate: 6, Period: durationpb.New(time.Second), Burst: 1}
	_, err = c.RateLimits.Check(ctx, &ratelimitv1.CheckRequest{Key: key, Limit: other, Hits: 1})
	if !errors.Is(err, concord.ErrRateLimitMismatch) {
		t.Fatalf("another limit: want ErrRateLimitMismatch, got %v", err)
	}
}

// The helper: a key with its limit; Check takes or refuses at once, Wait blocks in
// the server until the units pass, and a context that ends first takes nothing.
func TestRateLimitHelperChecksAndWaits(t *testing.T) {
	t.Parallel()
	c, key := connect(t), unique(t)
	ctx := within(t, 20*time.Second)
	api := c.RateLimit(key, 2, time.Second, 1)
	if d, err := api.Check(ctx, 1); err != nil || !d.GetAllowed() {
		t.Fatalf("first check: want allowed, got %v, %v", d, err)
	}
	if d, err := api.Check(ctx, 1); err != nil || d.GetAllowed() || d.GetRetryAfter().AsDuration() <= 0 {
		t.Fatalf("second check: want refused with a retry_after, got %v, %v", d, err)
	}
	started := time.Now()
	if d, err := api.Wait(ctx, 1); err != nil || !d.GetAllowed() {
		t.Fatalf("Wait: want allowed once the limit allows, got %v, %v", d, err)
	}
	if waited := time.Since(started); waited < 100*time.Millisecond {
		t.Fatalf("Wait returned after %v: the limit lets one unit through every 500 ms", waited)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.RateLimit(key, 2, time.Second, 1).Wait(short, 1); !errors.Is(err, concord.ErrNotAcquired) {
		t.Fatalf("a wait cut short: want ErrNotAcquired, got %v", err)
	}
}
