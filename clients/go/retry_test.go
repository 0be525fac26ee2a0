package concord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	chatv1 "go.concord.dev/concord/gen/concord/chat/v1"
	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
)

// redisUnavailable is the error the server sends while Redis is away.
func redisUnavailable(t *testing.T) error {
	st, err := status.New(codes.Unavailable, "Redis is unavailable").
		WithDetails(&errdetails.ErrorInfo{Reason: "REDIS_UNAVAILABLE", Domain: Domain})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestBackoffIsFullJitterUpToTheCap(t *testing.T) {
	highest := func(k int64) int64 { return k - 1 }
	lowest := func(int64) int64 { return 0 }
	for n, want := range []time.Duration{50, 100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		if got := backoff(n, highest); got != want-1 {
			t.Errorf("retry %d: longest pause %v, want just under %v", n, got, want)
		}
		if got := backoff(n, lowest); got != 0 {
			t.Errorf("retry %d: shortest pause %v, want 0", n, got)
		}
	}
	if got := backoff(1000, highest); got >= retryCap {
		t.Errorf("a late retry pauses %v, more than the cap", got)
	}
}

func TestRetryStopsWithinTheBudget(t *testing.T) {
	unavailable := redisUnavailable(t)
	for _, tc := range []struct {
		name   string
		ctx    time.Duration // the caller's deadline
		budget time.Duration // until: the retry budget
	}{
		{"budget first", 10 * time.Second, 300 * time.Millisecond},
		{"deadline first", 300 * time.Millisecond, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctx)
			defer cancel()
			start := time.Now()
			calls := 0
			err := retry(ctx, start.Add(tc.budget), func(int) error { calls++; return unavailable })
			took := time.Since(start)
			if !errors.Is(err, unavailable) || calls < 2 {
				t.Fatalf("want the last UNAVAILABLE after several tries, got %v after %d", err, calls)
			}
			if took > 300*time.Millisecond+time.Second { // no pause that would overrun is taken; slack for a busy machine
				t.Fatalf("retried for %v with a 300ms budget", took)
			}
		})
	}
}

func TestRetryReturnsOtherErrorsAtOnce(t *testing.T) {
	for _, err := range []error{
		status.Error(codes.Unavailable, "connection refused"), // no ErrorInfo: no server answered
		status.Error(codes.FailedPrecondition, "not held"),
		nil,
	} {
		calls := 0
		got := retry(context.Background(), time.Now().Add(time.Minute), func(int) error { calls++; return err })
		if calls != 1 || !errors.Is(got, err) {
			t.Errorf("%v: %d calls, returned %v", err, calls, got)
		}
	}
}

// invoke runs the interceptor over an invoker that fails UNAVAILABLE failures
// times, recording the requests it was given.
func invoke(t *testing.T, ctx context.Context, method string, req any, failures int) ([]any, error) {
	t.Helper()
	var seen []any
	unavailable := redisUnavailable(t)
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		seen = append(seen, req)
		if len(seen) <= failures {
			return unavailable
		}
		return nil
	}
	err := RetryInterceptor()(ctx, method, req, nil, nil, invoker)
	return seen, err
}

func TestInterceptorRetriesOnlyWhatIsSafeToRepeat(t *testing.T) {
	ctx := within(t, 10*time.Second)
	if seen, err := invoke(t, ctx, chatv1.ChatService_SendMessage_FullMethodName, &chatv1.SendMessageRequest{}, 1); len(seen) != 1 || status.Code(err) != codes.Unavailable {
		t.Fatalf("SendMessage: %d tries, %v; want 1 and UNAVAILABLE", len(seen), err)
	}
	plain := &queuev1.EnqueueRequest{Queue: "q", Tasks: []*queuev1.NewTask{{Type: "t", DedupeKey: "k"}, {Type: "t"}}}
	if seen, _ := invoke(t, ctx, queuev1.QueueService_Enqueue_FullMethodName, plain, 1); len(seen) != 1 {
		t.Fatalf("Enqueue with a task lacking a dedupe key was tried %d times", len(seen))
	}
	policy := &queuev1.SetQueuePolicyRequest{Queue: "q"}
	if seen, err := invoke(t, ctx, queuev1.QueueService_SetQueuePolicy_FullMethodName, policy, 1); len(seen) != 2 || err != nil {
		t.Fatalf("SetQueuePolicy: %d tries, %v; want 2 and success", len(seen), err)
	}
	deduped := &queuev1.EnqueueRequest{Queue: "q", Tasks: []*queuev1.NewTask{{Type: "t", DedupeKey: "k"}}}
	if seen, err := invoke(t, ctx, queuev1.QueueService_Enqueue_FullMethodName, deduped, 2); len(seen) != 3 || err != nil {
		t.Fatalf("Enqueue with dedupe keys: %d tries, %v; want 3 and success", len(seen), err)
	}
}

func TestInterceptorShrinksTheServerWaitOnEachRetry(t *testing.T) {
	type waiting interface{ GetWaitTimeout() *durationpb.Duration }
	for method, req := range map[string]waiting{
		queuev1.QueueService_Dequeue_FullMethodName:  &queuev1.DequeueRequest{Queues: []string{"q"}, WaitTimeout: durationpb.New(3 * time.Second)},
		queuev1.QueueService_WaitTask_FullMethodName: &queuev1.WaitTaskRequest{Queue: "q", TaskId: "t", WaitTimeout: durationpb.New(3 * time.Second)},
	} {
		seen, err := invoke(t, within(t, 10*time.Second), method, req, 3)
		if err != nil || len(seen) != 4 {
			t.Fatalf("%s: %d tries, %v; want 4 and success", method, len(seen), err)
		}
		last := 3*time.Second + 1
		for i, r := range seen {
			wait := r.(waiting).GetWaitTimeout().AsDuration()
			if wait >= last && i > 0 {
				t.Fatalf("%s: try %d waits %v, no less than the try before (%v)", method, i, wait, last)
			}
			last = wait
		}
		if req.GetWaitTimeout().AsDuration() != 3*time.Second {
			t.Fatalf("%s: the caller's request was changed: %v", method, req.GetWaitTimeout())
		}
	}
	// A wait of 0 (try once) has no time to retry in.
	once := &queuev1.DequeueRequest{Queues: []string{"q"}}
	if seen, err := invoke(t, within(t, 10*time.Second), queuev1.QueueService_Dequeue_FullMethodName, once, 1); len(seen) != 1 || err == nil {
		t.Fatalf("try-once Dequeue: %d tries, %v; want 1 and UNAVAILABLE", len(seen), err)
	}
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestLockRidesOutARedisRestart runs under tests/test_client_retries.py, which
// kills the Redis behind CONCORD_OUTAGE_ADDR's server before starting this test,
// and starts it again a second after the test prints "acquiring".
func TestLockRidesOutARedisRestart(t *testing.T) {
	addr := os.Getenv("CONCORD_OUTAGE_ADDR")
	if addr == "" {
		t.Skip("CONCORD_OUTAGE_ADDR is not set: tests/test_client_retries.py runs this test during a Redis restart")
	}
	c, err := NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := within(t, 10*time.Second)
	name := fmt.Sprintf("go:outage:%d", time.Now().UnixNano())
	fmt.Println("acquiring")
	lease, err := Lock(ctx, c.Locks, name, 10*time.Second)
	if err != nil {
		t.Fatalf("Lock across a Redis restart: %v", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
