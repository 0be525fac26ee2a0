package concord_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"go.concord.dev/concord"
	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
)

func TestWaitTaskOnAPendingTaskTimesOut(t *testing.T) {
	t.Parallel()
	c, queue := connect(t), unique(t)
	ctx := within(t, 10*time.Second)
	enqueued, err := c.Queues.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: queue, Tasks: []*queuev1.NewTask{{Type: "idle"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := enqueued.GetResults()[0].GetTaskId()
	start := time.Now()
	task, finished, err := concord.WaitTask(ctx, c.Queues, queue, id, 300*time.Millisecond)
	if err != nil || finished {
		t.Fatalf("WaitTask: finished %v, %v; want false and no error", finished, err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("waited %v for a 300ms timeout", waited)
	}
	if task.GetTaskId() != id || task.GetState() != queuev1.TaskState_TASK_STATE_READY {
		t.Fatalf("the pending task: %v", task)
	}
	got, err := concord.GetTask(ctx, c.Queues, queue, id)
	if err != nil || got.GetState() != queuev1.TaskState_TASK_STATE_READY || got.GetType() != "idle" {
		t.Fatalf("GetTask: %v, %v", got, err)
	}
}

// SearchTasks pages through the whole queue; a dead task is found by its error text.
func TestSearchTasksFindsADeadTaskByItsErrorText(t *testing.T) {
	t.Parallel()
	c, queue := connect(t), unique(t)
	ctx := within(t, 10*time.Second)
	if _, err := c.Queues.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: queue, Tasks: []*queuev1.NewTask{
		{Type: "resize", Payload: []byte(`{"file": "cat.png"}`)}, {Type: "mail", MaxAttempts: 1, Priority: 1000}}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Queues.Dequeue(ctx, &queuev1.DequeueRequest{Queues: []string{queue}})
	if err != nil || len(got.GetTasks()) != 1 {
		t.Fatalf("Dequeue: %v, %v", got, err)
	}
	task := got.GetTasks()[0]
	if _, err := c.Queues.Nack(ctx, &queuev1.NackRequest{Queue: queue, TaskId: task.GetTaskId(), Lease: task.GetLease(),
		Error: "SMTP 550: Mailbox full", Retryable: proto.Bool(false)}); err != nil {
		t.Fatal(err)
	}
	found, err := c.Queues.SearchTasks(ctx, &queuev1.SearchTasksRequest{Queue: queue, ErrorContains: "mailbox FULL"})
	if err != nil || len(found.GetTasks()) != 1 || found.GetTasks()[0].GetTaskId() != task.GetTaskId() ||
		found.GetTasks()[0].GetState() != queuev1.TaskState_TASK_STATE_DEAD || found.GetNextPageToken() != "" {
		t.Fatalf("SearchTasks by error: %v, %v", found, err)
	}
	var types []string
	request := &queuev1.SearchTasksRequest{Queue: queue, PageSize: 1}
	for {
		page, err := c.Queues.SearchTasks(ctx, request)
		if err != nil {
			t.Fatal(err)
		}
		for _, t := range page.GetTasks() {
			types = append(types, t.GetType())
		}
		if page.GetNextPageToken() == "" {
			break
		}
		request.PageToken = page.GetNextPageToken()
	}
	if len(types) != 2 || types[0] != "resize" || types[1] != "mail" {
		t.Fatalf("paged search: %v; want resize (ready), then mail (dead)", types)
	}
}

func TestGetTaskOfAnUnknownIDIsNotFound(t *testing.T) {
	t.Parallel()
	c, queue := connect(t), unique(t)
	ctx := within(t, 10*time.Second)
	_, err := concord.GetTask(ctx, c.Queues, queue, "no-such-task")
	if status.Code(err) != codes.NotFound || !errors.Is(err, concord.ErrTaskNotFound) {
		t.Fatalf("want NotFound/TASK_NOT_FOUND, got %v (reason %q)", err, concord.Reason(err))
	}
	if _, _, err := concord.WaitTask(ctx, c.Queues, queue, "no-such-task", time.Second); !errors.Is(err, concord.ErrTaskNotFound) {
		t.Fatalf("WaitTask: want TASK_NOT_FOUND, got %v", err)
	}
}

// A group's cap holds its second task back, says why, and the other group goes on.
func TestGroupsTakeTurnsUnderTheirCaps(t *testing.T) {
	t.Parallel()
	c, queue := connect(t), unique(t)
	ctx := within(t, 10*time.Second)
	cap1 := uint32(1)
	if _, err := c.Queues.SetGroupRules(ctx, &queuev1.SetGroupRulesRequest{Queue: queue, Group: "a",
		Rules: &queuev1.GroupRules{MaxLeased: &cap1}}); err != nil {
		t.Fatal(err)
	}
	enqueued, err := c.Queues.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: queue, Tasks: []*queuev1.NewTask{
		{Type: "t", Group: "a"}, {Type: "t", Group: "a"}, {Type: "t", Group: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Queues.Dequeue(ctx, &queuev1.DequeueRequest{Queues: []string{queue}, MaxTasks: 3})
	if err != nil || len(got.GetTasks()) != 2 {
		t.Fatalf("Dequeue: %v, %v; want one task of each group", got, err)
	}
	held, err := concord.GetTask(ctx, c.Queues, queue, enqueued.GetResults()[1].GetTaskId())
	if err != nil || held.GetWaitReason() != queuev1.WaitReason_WAIT_REASON_GROUP_AT_CAP || held.GetGroup() != "a" {
		t.Fatalf("the held task: %v, %v", held, err)
	}
}
