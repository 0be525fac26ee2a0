package concord

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
)

// Handler runs one task. Returning nil acks it; an error (or a panic) nacks it
// with the error's text, so the server retries it with backoff and dead-letters
// it after its max_attempts. ctx ends if the task's lease is lost meanwhile.
type Handler func(ctx context.Context, task *queuev1.Task) error

// Result is what a task produced. It travels with the task's Ack, and GetTask
// and WaitTask return it (Task.Result, Task.ResultType) while the queue's
// retention keeps the finished task.
type Result struct {
	Data []byte // at most the server's --queue-max-result bytes
	// Type says what Data holds, such as "application/json"; free text.
	Type string
}

// ResultHandler runs one task as a Handler does, and on success its Result is
// sent with the Ack. The Result of a failed attempt is dropped.
type ResultHandler func(ctx context.Context, task *queuev1.Task) (Result, error)

// Worker takes tasks from queues, in priority order, and runs the handler
// registered for each task's type, keeping the task's lease alive while it runs.
type Worker struct {
	// Concurrency is how many tasks run at once; default 1.
	Concurrency int
	// LeaseTTL is how long a task stays leased without renewal (a dead worker's
	// tasks come back after it); renewed every LeaseTTL/3. Default 30s.
	LeaseTTL time.Duration
	// Logger receives failures to settle a task; default slog.Default().
	Logger *slog.Logger

	client   queuev1.QueueServiceClient
	queues   []string
	handlers map[string]ResultHandler
}

// pollWait bounds one server-side Dequeue wait; Run stops at once on ctx anyway.
const pollWait = 30 * time.Second

// NewWorker takes tasks from queues, the first one first whenever it has tasks.
func NewWorker(client queuev1.QueueServiceClient, queues ...string) *Worker {
	return &Worker{client: client, queues: queues, handlers: map[string]ResultHandler{}}
}

// Handle registers h for tasks of type taskType. Tasks of a type with no
// handler are nacked. Register handlers before Run.
func (w *Worker) Handle(taskType string, h Handler) {
	w.HandleResult(taskType, func(ctx context.Context, task *queuev1.Task) (Result, error) {
		return Result{}, h(ctx, task)
	})
}

// HandleResult registers h, whose Result is sent with each Ack, for tasks of
// type taskType, as Handle does.
func (w *Worker) HandleResult(taskType string, h ResultHandler) { w.handlers[taskType] = h }

// Run takes and runs tasks until ctx ends, then waits for the running ones to
// finish and settle (they are not cancelled: a stopping worker completes what it
// started) and returns nil. It returns an error only if the server refuses the
// worker's requests for good (a bad queue name, say).
func (w *Worker) Run(ctx context.Context) error {
	var running sync.WaitGroup
	defer running.Wait()
	slots := make(chan struct{}, max(1, w.Concurrency)) // a token per running task
	for {
		select { // wait for a free slot, then claim every free one
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		free := 1
		for len(slots) < cap(slots) {
			slots <- struct{}{}
			free++
		}
		resp, err := w.client.Dequeue(ctx, &queuev1.DequeueRequest{
			Queues: w.queues, MaxTasks: uint32(free), LeaseTtl: durationpb.New(w.leaseTTL()),
			WaitTimeout: durationpb.New(pollWait),
		})
		for range free - len(resp.GetTasks()) {
			<-slots
		}
		for _, task := range resp.GetTasks() {
			running.Add(1)
			go func() {
				defer running.Done()
				defer func() { <-slots }()
				w.run(task)
			}()
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case status.Code(err) == codes.DeadlineExceeded:
			// Only Run's own ctx bounds the call; the status can arrive a moment
			// before ctx.Err() is set (the server's copy of the deadline ran out
			// first). The loop's select then sees ctx end.
			continue
		case status.Code(err) == codes.Unavailable: // the server restarts, or Redis is away: retry
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		case err != nil:
			return fmt.Errorf("concord: dequeue from %v: %w", w.queues, err)
		}
	}
}

func (w *Worker) leaseTTL() time.Duration {
	if w.LeaseTTL > 0 {
		return w.LeaseTTL
	}
	return 30 * time.Second
}

func (w *Worker) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}

// run handles one leased task, renewing its lease meanwhile, and settles it.
func (w *Worker) run(task *queuev1.Task) {
	ttl := w.leaseTTL()
	q, id, l := task.GetQueue(), task.GetTaskId(), task.GetLease()
	lease := keep(ttl, func(ctx context.Context) error {
		_, err := w.client.ExtendLease(ctx, &queuev1.ExtendLeaseRequest{
			Queue: q, TaskId: id, Lease: l, LeaseTtl: durationpb.New(ttl),
		})
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-lease.Lost():
			cancel() // another worker may have the task now: stop working on it
		case <-ctx.Done():
		}
	}()
	result, err := w.handle(ctx, task)
	cancel()
	if lost := lease.halt(); lost != nil {
		w.logger().Warn("concord: task lease lost; the task will run again", "queue", q, "task_id", id, "error", lost)
		return
	}
	settle, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err == nil {
		_, err = w.client.Ack(settle, &queuev1.AckRequest{
			Queue: q, TaskId: id, Lease: l, Result: result.Data, ResultType: result.Type,
		})
		if status.Code(err) == codes.InvalidArgument { // a Result the server refuses (too large, say):
			// fail the attempt with why, rather than leave the task to come back with its lease
			_, err = w.client.Nack(settle, &queuev1.NackRequest{Queue: q, TaskId: id, Lease: l, Error: errorText(err)})
		}
	} else {
		_, err = w.client.Nack(settle, &queuev1.NackRequest{Queue: q, TaskId: id, Lease: l, Error: errorText(err)})
	}
	if err != nil { // the lease runs out and the task is retried: nothing is lost
		w.logger().Warn("concord: could not settle task", "queue", q, "task_id", id, "error", err)
	}
}

// handle runs the task's handler, turning a missing handler or a panic into an error.
func (w *Worker) handle(ctx context.Context, task *queuev1.Task) (result Result, err error) {
	h, ok := w.handlers[task.GetType()]
	if !ok {
		return Result{}, fmt.Errorf("no handler for task type %q", task.GetType())
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, task)
}

// maxErrorText is the most the server keeps of a failed attempt's error.
const maxErrorText = 4096

// errorText is err's text cut to what Nack accepts, still valid UTF-8.
func errorText(err error) string {
	text := err.Error()
	if len(text) > maxErrorText {
		text = strings.ToValidUTF8(text[:maxErrorText], "")
	}
	return text
}
