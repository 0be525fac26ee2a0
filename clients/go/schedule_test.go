package concord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"go.concord.dev/concord"
	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
)

func every(d time.Duration, taskType string, payload []byte) *queuev1.ScheduleSpec {
	return &queuev1.ScheduleSpec{Timing: &queuev1.ScheduleSpec_Every{Every: durationpb.New(d)}, Type: taskType,
		Payload: payload}
}

// createSchedule makes a schedule that the test deletes when it ends, so a failed
// test leaves nothing ticking.
func createSchedule(t *testing.T, c *concord.Client, queue, name string, spec *queuev1.ScheduleSpec) *queuev1.Schedule {
	t.Helper()
	s, err := concord.CreateSchedule(within(t, 5*time.Second), c.Queues, queue, name, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := concord.DeleteSchedule(ctx, c.Queues, queue, name); err != nil && !errors.Is(err, concord.ErrScheduleNotFound) {
			t.Error(err)
		}
	})
	return s
}

func TestAScheduleTicksTasksIntoItsQueue(t *testing.T) {
	t.Parallel()
	c, queue, name := connect(t), unique(t), "every-second"
	ctx := within(t, 30*time.Second)
	before := time.Now()
	s := createSchedule(t, c, queue, name, every(time.Second, "tick", []byte("ping")))
	if s.GetQueue() != queue || s.GetName() != name || s.GetPaused() || s.GetSpec().GetEvery().AsDuration() != time.Second ||
		s.GetSpec().GetType() != "tick" || s.GetVersion() == 0 || s.GetRuns() != 0 {
		t.Fatalf("the new schedule: %v", s)
	}
	// The first tick is one interval after it was made (clocks may differ a little).
	if next := s.GetNextRunAt().AsTime(); next.Before(before) || next.After(time.Now().Add(3*time.Second)) {
		t.Fatalf("first tick at %v, made at %v", next, before)
	}

	// Its first tick enqueues a task that names it.
	var ticked *queuev1.Schedule
	eventually(t, "the schedule's first task", func() bool {
		g, err := concord.GetSchedule(ctx, c.Queues, queue, name)
		if err != nil {
			t.Fatal(err)
		}
		ticked = g
		return g.GetLastTaskId() != ""
	})
	task, err := concord.GetTask(ctx, c.Queues, queue, ticked.GetLastTaskId())
	if err != nil {
		t.Fatal(err)
	}
	if task.GetSchedule() != name || task.GetType() != "tick" || string(task.GetPayload()) != "ping" ||
		!task.GetScheduledAt().AsTime().Equal(ticked.GetLastRunAt().AsTime()) {
		t.Fatalf("the ticked task: %v; the schedule: %v", task, ticked)
	}
	peeked, err := c.Queues.Peek(ctx, &queuev1.PeekRequest{Queue: queue})
	if err != nil || len(peeked.GetTasks()) == 0 || peeked.GetTasks()[0].GetType() != "tick" {
		t.Fatalf("Peek: %v, %v", peeked, err)
	}

	var listed []*queuev1.Schedule
	eventually(t, "the schedule to record its run", func() bool {
		listed, err = concord.ListSchedules(ctx, c.Queues, queue)
		if err != nil {
			t.Fatal(err)
		}
		return len(listed) == 1 && listed[0].GetRuns() >= 1
	})
	if l := listed[0]; l.GetName() != name || l.GetPaused() || !l.GetNextRunAt().AsTime().After(l.GetLastRunAt().AsTime()) {
		t.Fatalf("listed: %v", l)
	}

	paused, err := concord.PauseSchedule(ctx, c.Queues, queue, name)
	if err != nil || !paused.GetPaused() || paused.GetNextRunAt() != nil {
		t.Fatalf("PauseSchedule: %v, %v", paused, err)
	}
	if again, err := concord.PauseSchedule(ctx, c.Queues, queue, name); err != nil || again.GetVersion() != paused.GetVersion() {
		t.Fatalf("pausing a paused schedule changes nothing: %v, %v", again, err)
	}
	if g, err := concord.GetSchedule(ctx, c.Queues, queue, name); err != nil || !g.GetPaused() {
		t.Fatalf("GetSchedule while paused: %v, %v", g, err)
	}
	resumed, err := concord.ResumeSchedule(ctx, c.Queues, queue, name)
	if err != nil || resumed.GetPaused() || resumed.GetNextRunAt() == nil || resumed.GetVersion() <= paused.GetVersion() {
		t.Fatalf("ResumeSchedule: %v, %v", resumed, err)
	}

	if err := concord.DeleteSchedule(ctx, c.Queues, queue, name); err != nil {
		t.Fatal(err)
	}
	if _, err := concord.GetSchedule(ctx, c.Queues, queue, name); !errors.Is(err, concord.ErrScheduleNotFound) {
		t.Fatalf("GetSchedule after DeleteSchedule: want SCHEDULE_NOT_FOUND, got %v", err)
	}
	if listed, err := concord.ListSchedules(ctx, c.Queues, queue); err != nil || len(listed) != 0 {
		t.Fatalf("ListSchedules after DeleteSchedule: %v, %v", listed, err)
	}
	// The tasks it enqueued stay.
	if got, err := concord.GetTask(ctx, c.Queues, queue, task.GetTaskId()); err != nil || got.GetSchedule() != name {
		t.Fatalf("the ticked task after DeleteSchedule: %v, %v", got, err)
	}
}

func TestUpdateScheduleReplacesTheSpec(t *testing.T) {
	t.Parallel()
	c, queue, name := connect(t), unique(t), "report"
	ctx := within(t, 10*time.Second)
	created := createSchedule(t, c, queue, name, every(time.Hour, "report", nil))
	cron := &queuev1.ScheduleSpec{Timing: &queuev1.ScheduleSpec_Cron{Cron: "0 9 * * 1"}, TimeZone: "Europe/Oslo",
		Type: "weekly_report", Priority: 5, Missed: queuev1.MissedTicks_MISSED_TICKS_SKIP}
	updated, err := concord.UpdateSchedule(ctx, c.Queues, queue, name, cron)
	if err != nil {
		t.Fatal(err)
	}
	spec := updated.GetSpec()
	if spec.GetCron() != "0 9 * * 1" || spec.GetTimeZone() != "Europe/Oslo" || spec.GetEvery() != nil ||
		spec.GetType() != "weekly_report" || spec.GetPriority() != 5 || spec.GetMissed() != queuev1.MissedTicks_MISSED_TICKS_SKIP {
		t.Fatalf("the updated spec: %v", spec)
	}
	if updated.GetVersion() <= created.GetVersion() || updated.GetPaused() {
		t.Fatalf("updated: version %d after %d, paused %v", updated.GetVersion(), created.GetVersion(), updated.GetPaused())
	}
	// Mondays at 09:00 in Oslo (checked where Go has the zone), within the next week.
	next := updated.GetNextRunAt().AsTime()
	oslo, err := time.LoadLocation("Europe/Oslo")
	if err == nil && (next.In(oslo).Weekday() != time.Monday || next.In(oslo).Hour() != 9 || next.Minute() != 0) {
		t.Fatalf("next tick %v is not a Monday 09:00 in Oslo", next.In(oslo))
	}
	if next.After(time.Now().Add(8 * 24 * time.Hour)) {
		t.Fatalf("next tick %v is more than a week away", next)
	}
}

func TestScheduleReasons(t *testing.T) {
	t.Parallel()
	c, queue := connect(t), unique(t)
	ctx := within(t, 10*time.Second)
	createSchedule(t, c, queue, "once", every(time.Hour, "t", nil))
	_, err := concord.CreateSchedule(ctx, c.Queues, queue, "once", every(time.Minute, "t", nil))
	if status.Code(err) != codes.AlreadyExists || !errors.Is(err, concord.ErrScheduleExists) {
		t.Fatalf("a second CreateSchedule: want AlreadyExists/SCHEDULE_EXISTS, got %v (reason %q)", err, concord.Reason(err))
	}

	missing := "no-such-schedule"
	_, err = concord.GetSchedule(ctx, c.Queues, queue, missing)
	if status.Code(err) != codes.NotFound || !errors.Is(err, concord.ErrScheduleNotFound) ||
		errors.Is(err, concord.ErrTaskNotFound) {
		t.Fatalf("GetSchedule of an unknown name: want NotFound/SCHEDULE_NOT_FOUND, got %v (reason %q)", err, concord.Reason(err))
	}
	for what, call := range map[string]func() error{
		"UpdateSchedule": func() error {
			_, err := concord.UpdateSchedule(ctx, c.Queues, queue, missing, every(time.Hour, "t", nil))
			return err
		},
		"PauseSchedule":  func() error { _, err := concord.PauseSchedule(ctx, c.Queues, queue, missing); return err },
		"ResumeSchedule": func() error { _, err := concord.ResumeSchedule(ctx, c.Queues, queue, missing); return err },
		"DeleteSchedule": func() error { return concord.DeleteSchedule(ctx, c.Queues, queue, missing) },
	} {
		if err := call(); !errors.Is(err, concord.ErrScheduleNotFound) {
			t.Errorf("%s of an unknown name: want SCHEDULE_NOT_FOUND, got %v", what, err)
		}
	}
	if listed, err := concord.ListSchedules(ctx, c.Queues, unique(t)); err != nil || len(listed) != 0 {
		t.Fatalf("ListSchedules of a queue without schedules: %v, %v", listed, err)
	}
}

// pagedSchedules serves ListSchedules in pages of two, from a list that a tick
// reorders after the first page (as the server's pages follow the tick order).
type pagedSchedules struct {
	queuev1.QueueServiceClient
	pages  [][]string
	tokens []string // the page tokens asked for
}

func (p *pagedSchedules) ListSchedules(_ context.Context, req *queuev1.ListSchedulesRequest,
	_ ...grpc.CallOption) (*queuev1.ListSchedulesResponse, error) {
	p.tokens = append(p.tokens, req.GetPageToken())
	i := len(p.tokens) - 1
	resp := &queuev1.ListSchedulesResponse{}
	for _, name := range p.pages[i] {
		resp.Schedules = append(resp.Schedules, &queuev1.Schedule{Queue: req.GetQueue(), Name: name})
	}
	if i+1 < len(p.pages) {
		resp.NextPageToken = string(rune('a' + i))
	}
	return resp, nil
}

func TestListSchedulesReadsEveryPageOnce(t *testing.T) {
	// "a" ticked between the first page and the second, and moved behind "c".
	fake := &pagedSchedules{pages: [][]string{{"a", "b"}, {"c", "a"}, {"d"}}}
	listed, err := concord.ListSchedules(context.Background(), fake, "q")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range listed {
		names = append(names, s.GetName())
	}
	if len(names) != 4 || names[0] != "a" || names[1] != "b" || names[2] != "c" || names[3] != "d" {
		t.Fatalf("listed %v; want [a b c d]", names)
	}
	if len(fake.tokens) != 3 || fake.tokens[0] != "" || fake.tokens[1] != "a" || fake.tokens[2] != "b" {
		t.Fatalf("page tokens sent: %q", fake.tokens)
	}
}
