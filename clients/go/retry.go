package concord

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	autocompletev1 "go.concord.dev/concord/gen/concord/autocomplete/v1"
	chatv1 "go.concord.dev/concord/gen/concord/chat/v1"
	electionv1 "go.concord.dev/concord/gen/concord/election/v1"
	filesv1 "go.concord.dev/concord/gen/concord/files/v1"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
	semaphorev1 "go.concord.dev/concord/gen/concord/semaphore/v1"
)

// Retries: calls that are safe to repeat ride out short outages. A Client from
// NewClient (or any connection dialled with RetryInterceptor) retries them while
// the Concord server answers UNAVAILABLE (its Redis restarts or fails over, or
// the server is shutting down), pausing with full-jitter exponential backoff:
// uniform in [0, min(1s, 50ms x 2^n)). Retries stop within the caller's budget:
//
//   - a call that waits in the server (lock and semaphore Acquire, election
//     Campaign, Dequeue, WaitTask) retries within its wait_timeout, each retry waiting only for what
//     is left of it, so a wait of 0 (TryOnce, a WaitTask that looks once) is not
//     retried;
//   - any other call retries until its context's deadline, or for
//     DefaultRetryBudget when the context has none.
//
// Every retry keeps the caller's context, so none outlives its deadline. Only an
// UNAVAILABLE the Concord server answered (it carries an ErrorInfo) is retried; a
// transport failure (no server listening, a refused TLS handshake) is returned
// at once, as is every other error.
//
// Retried, because a repeat cannot do harm:
//
//   - locks and semaphores: Acquire (the server lets go of an acquire cut short by
//     a Redis failure, leaving the queue or passing on a grant that reached it, so
//     a repeat never leaves two holders; at worst it waits behind the abandoned
//     grant until that is let go), Refresh (sets the TTL from now), Release (a
//     second one changes nothing; if the first reached Redis before its reply was
//     lost, the repeat reports LOCK_NOT_HELD / PERMIT_NOT_HELD), Describe, List*,
//     semaphore SetLimit (it sets the whole limit; a repeat whose first try took
//     effect reports that limit as the previous one);
//   - queues: Dequeue (a dequeue whose reply was lost leaves its tasks leased to
//     nobody; they come back when the lease expires, so nothing is lost), Ack,
//     Nack, ExtendLease, Release (each needs the task's lease, which the first
//     success ends, so a repeat changes nothing and reports TASK_LEASE_NOT_HELD),
//     ReportProgress (proven by the lease like Ack; a repeat records the same
//     progress again and sets the lease's TTL from now), SetQueuePolicy (it
//     replaces the whole policy), Stats, Peek, ListDead, SearchTasks, ListQueues, GetTask,
//     WaitTask, GetQueuePolicy, and Enqueue when every task has a dedupe_key (a
//     repeat names the first task as a duplicate);
//   - schedules: GetSchedule, ListSchedules, PauseSchedule and ResumeSchedule (a
//     repeat finds the schedule paused or running already and changes nothing),
//     UpdateSchedule (it replaces the whole spec; a repeat reckons the next tick
//     from now again);
//   - chat: Ack (seen positions only move forward), ListChats, GetHistory,
//     ListAllChats; autocomplete: SuggestRecent, Suggest, Count; files: ListFiles;
//   - elections: Campaign (like Acquire: at worst a repeat waits behind a
//     leadership won by a try whose reply was lost, until its TTL runs out),
//     Leader, Proclaim (it sets the whole value; a repeat records it again),
//     Refresh (sets the TTL from now).
//
// Not retried, because a repeat could do something twice: SendMessage and
// CreateChat, CreateSchedule and DeleteSchedule (a repeat of one that took effect
// would report SCHEDULE_EXISTS or SCHEDULE_NOT_FOUND), Enqueue without dedupe
// keys, Cancel, Purge, RetryDead, ForceRelease, JoinChat, LeaveChat, the
// autocomplete writes, MarkDone, Finish, election Resign (a repeat of one that
// took effect would report NOT_LEADER), and every stream (Election.Campaign and
// Election.Observe open their streams again themselves).
const (
	retryBase = 50 * time.Millisecond
	retryCap  = time.Second // an outage's end is noticed within a second
	// DefaultRetryBudget bounds the retries of a call that does not wait in the
	// server and whose context has no deadline.
	DefaultRetryBudget = 10 * time.Second
)

var safeToRepeat = map[string]bool{
	lockv1.LockService_Acquire_FullMethodName:                       true,
	lockv1.LockService_Release_FullMethodName:                       true,
	lockv1.LockService_Refresh_FullMethodName:                       true,
	lockv1.LockService_Describe_FullMethodName:                      true,
	lockv1.LockService_ListLocks_FullMethodName:                     true,
	semaphorev1.SemaphoreService_Acquire_FullMethodName:             true,
	semaphorev1.SemaphoreService_Release_FullMethodName:             true,
	semaphorev1.SemaphoreService_Refresh_FullMethodName:             true,
	semaphorev1.SemaphoreService_Describe_FullMethodName:            true,
	semaphorev1.SemaphoreService_ListSemaphores_FullMethodName:      true,
	semaphorev1.SemaphoreService_SetLimit_FullMethodName:            true,
	queuev1.QueueService_Dequeue_FullMethodName:                     true,
	queuev1.QueueService_Ack_FullMethodName:                         true,
	queuev1.QueueService_Nack_FullMethodName:                        true,
	queuev1.QueueService_ExtendLease_FullMethodName:                 true,
	queuev1.QueueService_Release_FullMethodName:                     true,
	queuev1.QueueService_Stats_FullMethodName:                       true,
	queuev1.QueueService_Peek_FullMethodName:                        true,
	queuev1.QueueService_ListDead_FullMethodName:                    true,
	queuev1.QueueService_SearchTasks_FullMethodName:                 true,
	queuev1.QueueService_ListQueues_FullMethodName:                  true,
	queuev1.QueueService_GetTask_FullMethodName:                     true,
	queuev1.QueueService_WaitTask_FullMethodName:                    true,
	queuev1.QueueService_ReportProgress_FullMethodName:              true,
	queuev1.QueueService_SetQueuePolicy_FullMethodName:              true,
	queuev1.QueueService_GetQueuePolicy_FullMethodName:              true,
	queuev1.QueueService_GetSchedule_FullMethodName:                 true,
	queuev1.QueueService_ListSchedules_FullMethodName:               true,
	queuev1.QueueService_PauseSchedule_FullMethodName:               true,
	queuev1.QueueService_ResumeSchedule_FullMethodName:              true,
	queuev1.QueueService_UpdateSchedule_FullMethodName:              true,
	chatv1.ChatService_Ack_FullMethodName:                           true,
	chatv1.ChatService_ListChats_FullMethodName:                     true,
	chatv1.ChatService_GetHistory_FullMethodName:                    true,
	chatv1.ChatService_ListAllChats_FullMethodName:                  true,
	autocompletev1.AutocompleteService_SuggestRecent_FullMethodName: true,
	autocompletev1.AutocompleteService_Suggest_FullMethodName:       true,
	autocompletev1.AutocompleteService_Count_FullMethodName:         true,
	filesv1.FileService_ListFiles_FullMethodName:                    true,
	electionv1.ElectionService_Campaign_FullMethodName:              true,
	electionv1.ElectionService_Leader_FullMethodName:                true,
	electionv1.ElectionService_Proclaim_FullMethodName:              true,
	electionv1.ElectionService_Refresh_FullMethodName:               true,
}

// repeatable reports whether a repeat of this call cannot do harm (see Retries).
func repeatable(method string, req any) bool {
	if r, ok := req.(*queuev1.EnqueueRequest); ok && method == queuev1.QueueService_Enqueue_FullMethodName {
		for _, t := range r.GetTasks() {
			if t.GetDedupeKey() == "" {
				return false
			}
		}
		return len(r.GetTasks()) > 0
	}
	return safeToRepeat[method]
}

// serverWait is how long req asks the server to wait, and whether it is a waiting call.
func serverWait(req any) (time.Duration, bool) {
	if r, ok := req.(interface{ GetWaitTimeout() *durationpb.Duration }); ok {
		return r.GetWaitTimeout().AsDuration(), true
	}
	return 0, false
}

// withWait is a copy of a waiting request that waits d instead; the caller's
// request is left as it was.
func withWait(req any, d time.Duration) any {
	switch r := req.(type) {
	case *lockv1.AcquireRequest:
		c := proto.CloneOf(r)
		c.WaitTimeout = durationpb.New(d)
		return c
	case *semaphorev1.AcquireRequest:
		c := proto.CloneOf(r)
		c.WaitTimeout = durationpb.New(d)
		return c
	case *queuev1.DequeueRequest:
		c := proto.CloneOf(r)
		c.WaitTimeout = durationpb.New(d)
		return c
	case *queuev1.WaitTaskRequest:
		c := proto.CloneOf(r)
		c.WaitTimeout = durationpb.New(d)
		return c
	case *electionv1.CampaignRequest:
		c := proto.CloneOf(r)
		c.WaitTimeout = durationpb.New(d)
		return c
	}
	return req
}

// backoff is the pause before retry n (0 first): full jitter, so clients that
// failed together do not come back together. rnd(k) is uniform in [0, k).
func backoff(n int, rnd func(int64) int64) time.Duration {
	return time.Duration(rnd(int64(min(retryCap, retryBase<<min(n, 20)))))
}

// retryable: the Concord server itself answered UNAVAILABLE (a transport failure
// carries no ErrorInfo: retrying a server that is not there only delays the error).
func retryable(err error) bool {
	return status.Code(err) == codes.Unavailable && Reason(err) != ""
}

// retry calls call until it succeeds or fails for good, or the next pause would
// reach until or the end of ctx; it returns the last error.
func retry(ctx context.Context, until time.Time, call func(attempt int) error) error {
	for n := 0; ; n++ {
		err := call(n)
		if err == nil || !retryable(err) {
			return err
		}
		pause := backoff(n, rand.Int64N)
		if !time.Now().Add(pause).Before(until) {
			return err
		}
		if d, ok := ctx.Deadline(); ok && !time.Now().Add(pause).Before(d) {
			return err
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}

// RetryInterceptor retries the unary calls that are safe to repeat (see
// Retries). NewClient installs it; add it to a connection of your own with
// grpc.WithChainUnaryInterceptor(concord.RetryInterceptor()).
func RetryInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker,
		opts ...grpc.CallOption) error {
		if !repeatable(method, req) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		start := time.Now()
		wait, waits := serverWait(req)
		until := start.Add(DefaultRetryBudget)
		if waits {
			until = start.Add(wait) // the wait's time is spent whether Redis answers or not
		} else if d, ok := ctx.Deadline(); ok {
			until = d
		}
		return retry(ctx, until, func(attempt int) error {
			r := req
			if waits && attempt > 0 {
				r = withWait(req, max(0, wait-time.Since(start)))
			}
			return invoker(ctx, method, r, reply, cc, opts...)
		})
	}
}
