package concord_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.concord.dev/concord"
	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
)

func TestWorkerAcksRetriesAndDeadLetters(t *testing.T) {
	t.Parallel() // independent: every test has names of its own
	c, queue := connect(t), unique(t)
	ctx := within(t, 30*time.Second)
	tasks := []*queuev1.NewTask{{Type: "flaky", MaxAttempts: 2}, {Type: "doomed", MaxAttempts: 1}, {Type: "unknown", MaxAttempts: 1}}
	for i := range 5 {
		tasks = append(tasks, &queuev1.NewTask{Type: "greet", Payload: []byte(fmt.Sprint(i))})
	}
	if _, err := c.Queues.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: queue, Tasks: tasks}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	greeted := map[string]bool{}
	flakyAttempts := 0
	w := concord.NewWorker(c.Queues, queue)
	w.Concurrency = 3
	w.LeaseTTL = 3 * time.Second
	w.Handle("greet", func(ctx context.Context, task *queuev1.Task) error {
		time.Sleep(1200 * time.Millisecond) // longer than a third of the lease: renewed meanwhile
		mu.Lock()
		defer mu.Unlock()
		greeted[string(task.GetPayload())] = true
		return nil
	})
	w.Handle("flaky", func(ctx context.Context, task *queuev1.Task) error {
		mu.Lock()
		defer mu.Unlock()
		flakyAttempts = int(task.GetAttempt())
		if task.GetAttempt() == 1 {
			return errors.New("first try fails")
		}
		return nil
	})
	w.Handle("doomed", func(ctx context.Context, task *queuev1.Task) error { panic("never works") })

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	eventually(t, "every task settled", func() bool {
		s, err := c.Queues.Stats(ctx, &queuev1.StatsRequest{Queue: queue})
		return err == nil && s.GetReady()+s.GetDelayed()+s.GetLeased() == 0 && s.GetDead() == 2
	})
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(greeted) != 5 || flakyAttempts != 2 {
		t.Fatalf("greeted %v, flaky ran %d times", greeted, flakyAttempts)
	}
	dead, err := c.Queues.ListDead(ctx, &queuev1.ListDeadRequest{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	errs := map[string]string{}
	for _, task := range dead.GetTasks() {
		errs[task.GetType()] = task.GetLastError()
	}
	if errs["doomed"] != "handler panicked: never works" || errs["unknown"] != `no handler for task type "unknown"` {
		t.Fatalf("dead tasks' errors: %v", errs)
	}
}

func TestWorkerAcksWithTheHandlersResult(t *testing.T) {
	t.Parallel()
	c, queue := connect(t), unique(t)
	ctx := within(t, 30*time.Second)
	enqueued, err := c.Queues.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: queue, Tasks: []*queuev1.NewTask{{Type: "sum"}}})
	if err != nil {
		t.Fatal(err)
	}
	id := enqueued.GetResults()[0].GetTaskId()
	result := []byte{0, 0xff, 'o', 'k', 0xc3} // not UTF-8, with a NUL: must come back byte for byte

	type waited struct {
		task     *queuev1.Task
		finished bool
		err      error
	}
	done := make(chan waited)
	go func() { // started before the worker, so it usually waits and the Ack wakes it
		task, finished, err := concord.WaitTask(ctx, c.Queues, queue, id, 20*time.Second)
		done <- waited{task, finished, err}
	}()

	w := concord.NewWorker(c.Queues, queue)
	w.HandleResult("sum", func(ctx context.Context, task *queuev1.Task) (concord.Result, error) {
		return concord.Result{Data: result, Type: "application/octet-stream"}, nil
	})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	got := <-done
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got.err != nil || !got.finished {
		t.Fatalf("WaitTask: finished %v, %v", got.finished, got.err)
	}
	task := got.task
	if task.GetTaskId() != id || task.GetState() != queuev1.TaskState_TASK_STATE_SUCCEEDED ||
		!bytes.Equal(task.GetResult(), result) || task.GetResultType() != "application/octet-stream" ||
		task.GetFinishedAt() == nil {
		t.Fatalf("the finished task: %v", task)
	}
	_, err = c.Queues.Cancel(ctx, &queuev1.CancelRequest{Queue: queue, TaskId: id})
	if !errors.Is(err, concord.ErrTaskFinished) {
		t.Fatalf("Cancel of a succeeded task: want TASK_FINISHED, got %v", err)
	}
}

func TestWorkerNacksAResultTheServerRefuses(t *testing.T) {
	t.Parallel()
	c, queue := connect(t), unique(t)
	ctx := within(t, 30*time.Second)
	enqueued, err := c.Queues.Enqueue(ctx, &queuev1.EnqueueRequest{Queue: queue,
		Tasks: []*queuev1.NewTask{{Type: "bad", MaxAttempts: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	w := concord.NewWorker(c.Queues, queue)
	w.LeaseTTL = time.Minute // the test ends long before the lease could bring the task back
	w.HandleResult("bad", func(ctx context.Context, task *queuev1.Task) (concord.Result, error) {
		return concord.Result{Data: []byte("x"), Type: "no\x00control characters"}, nil
	})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go w.Run(runCtx)
	task, finished, err := concord.WaitTask(ctx, c.Queues, queue, enqueued.GetResults()[0].GetTaskId(), 20*time.Second)
	if err != nil || !finished || task.GetState() != queuev1.TaskState_TASK_STATE_DEAD ||
		!strings.Contains(task.GetLastError(), "result_type") {
		t.Fatalf("want the task dead with the server's complaint, got finished %v: %v, %v", finished, task, err)
	}
}
