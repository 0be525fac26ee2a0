package concord

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ratelimitv1 "go.concord.dev/concord/gen/concord/ratelimit/v1"
)

// RateLimit is one key of the rate limit service with the limit its calls carry
// (nil: the key's stored limit, set by SetLimit). Every server decides it alike,
// on the Redis clock.
type RateLimit struct {
	Key   string
	Limit *ratelimitv1.Limit

	client ratelimitv1.RateLimitServiceClient
}

// RateLimit is key limited to rate units per period, burst at once from idle (0:
// rate), by GCRA, the service's default; set Limit for another algorithm. Pass
// rate 0 to use the key's stored limit.
func (c *Client) RateLimit(key string, rate uint64, per time.Duration, burst uint64) *RateLimit {
	r := &RateLimit{Key: key, client: c.RateLimits}
	if rate > 0 {
		r.Limit = &ratelimitv1.Limit{Rate: rate, Period: durationpb.New(per), Burst: burst}
	}
	return r
}

// Check decides now whether hits units pass (0 peeks), taking them if they do;
// a refusal's RetryAfter says how long until they would.
func (r *RateLimit) Check(ctx context.Context, hits uint64) (*ratelimitv1.CheckResponse, error) {
	resp, err := r.client.Check(ctx, &ratelimitv1.CheckRequest{Key: r.Key, Limit: r.Limit, Hits: hits})
	if err != nil {
		return nil, fmt.Errorf("concord: check rate limit %q: %w", r.Key, err)
	}
	return resp, nil
}

// Wait takes hits units once the limit lets them pass, waiting in the server
// behind the key's earlier waiters (FIFO, woken when the limit allows, no
// polling) until ctx ends; then the error wraps ErrNotAcquired and nothing was
// taken.
func (r *RateLimit) Wait(ctx context.Context, hits uint64) (*ratelimitv1.WaitResponse, error) {
	var resp *ratelimitv1.WaitResponse
	err := waitFor(ctx, options{}, func(ctx context.Context, wait time.Duration) (bool, error) {
		var err error
		resp, err = r.client.Wait(ctx, &ratelimitv1.WaitRequest{Key: r.Key, Limit: r.Limit, Hits: hits,
			WaitTimeout: durationpb.New(wait)})
		return resp.GetAllowed(), err
	})
	if err != nil {
		return nil, fmt.Errorf("concord: wait for rate limit %q: %w", r.Key, err)
	}
	return resp, nil
}
