package concord

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
)

// GetTask reports a task in any state: pending, or finished (succeeded with its
// Result, dead with its LastError, cancelled) while the queue's retention keeps
// it. Once it is gone the error wraps ErrTaskNotFound.
func GetTask(ctx context.Context, client queuev1.QueueServiceClient, queue, taskID string) (*queuev1.Task, error) {
	resp, err := client.GetTask(ctx, &queuev1.GetTaskRequest{Queue: queue, TaskId: taskID})
	if err != nil {
		return nil, fmt.Errorf("concord: get task %q: %w", taskID, err)
	}
	return resp.GetTask(), nil
}

// WaitTask waits in the server until the task finishes (SUCCEEDED, DEAD or
// CANCELLED: finished is true) or until timeout passes or ctx's deadline nears
// (finished is false, and the task shows where it is). A timeout of 0 looks once.
func WaitTask(ctx context.Context, client queuev1.QueueServiceClient, queue, taskID string,
	timeout time.Duration) (task *queuev1.Task, finished bool, err error) {
	end := time.Now().Add(timeout)
	for {
		// Long waits go in bounded steps, like Lock's, so a dead connection is
		// noticed and no step exceeds the server's largest wait.
		wait := min(time.Until(end), longestWait)
		if deadline, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(deadline)-replyMargin)
		}
		wait = max(0, wait)
		resp, err := client.WaitTask(ctx, &queuev1.WaitTaskRequest{
			Queue: queue, TaskId: taskID, WaitTimeout: durationpb.New(wait),
		})
		if err != nil {
			return nil, false, fmt.Errorf("concord: wait for task %q: %w", taskID, err)
		}
		if resp.GetFinished() || wait < longestWait {
			return resp.GetTask(), resp.GetFinished(), nil
		}
	}
}
