package concord

import (
	"context"
	"fmt"

	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
)

// Schedules: a queue's named recurring schedules, each tick of which enqueues one
// task (its Task.Schedule is the schedule's name, Task.ScheduledAt the tick),
// exactly once however many servers run. A spec ticks on a cron expression or a
// fixed interval:
//
//	spec := &queuev1.ScheduleSpec{
//		Timing: &queuev1.ScheduleSpec_Every{Every: durationpb.New(time.Minute)},
//		Type:   "report",
//	}
//	s, err := concord.CreateSchedule(ctx, client.Queues, "reports", "hourly-report", spec)
//
// These helpers are one call each (ListSchedules one per page), with errors that
// name the schedule; errors.Is(err, ErrScheduleNotFound) and ErrScheduleExists
// tell the reasons apart. To create a schedule paused, or to pause or resume it
// as part of an update, call client.Queues.CreateSchedule or UpdateSchedule.

// CreateSchedule adds the named schedule to the queue and returns it, with its
// first tick in NextRunAt. If the queue has a schedule of that name the error
// wraps ErrScheduleExists (UpdateSchedule changes it).
func CreateSchedule(ctx context.Context, client queuev1.QueueServiceClient, queue, name string,
	spec *queuev1.ScheduleSpec) (*queuev1.Schedule, error) {
	resp, err := client.CreateSchedule(ctx, &queuev1.CreateScheduleRequest{Queue: queue, Name: name, Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("concord: create schedule %q: %w", name, err)
	}
	return resp.GetSchedule(), nil
}

// UpdateSchedule replaces the schedule's whole spec, leaving it paused or running
// as it was; its next tick is reckoned from now. The error wraps
// ErrScheduleNotFound if the queue has no schedule of that name.
func UpdateSchedule(ctx context.Context, client queuev1.QueueServiceClient, queue, name string,
	spec *queuev1.ScheduleSpec) (*queuev1.Schedule, error) {
	resp, err := client.UpdateSchedule(ctx, &queuev1.UpdateScheduleRequest{Queue: queue, Name: name, Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("concord: update schedule %q: %w", name, err)
	}
	return resp.GetSchedule(), nil
}

// PauseSchedule stops the schedule's ticks (pausing a paused one changes
// nothing). The error wraps ErrScheduleNotFound if there is none of that name.
func PauseSchedule(ctx context.Context, client queuev1.QueueServiceClient, queue, name string) (*queuev1.Schedule, error) {
	resp, err := client.PauseSchedule(ctx, &queuev1.PauseScheduleRequest{Queue: queue, Name: name})
	if err != nil {
		return nil, fmt.Errorf("concord: pause schedule %q: %w", name, err)
	}
	return resp.GetSchedule(), nil
}

// ResumeSchedule starts a paused schedule's ticks again from its first tick after
// now: ticks that fell due while it was paused do not run. The error wraps
// ErrScheduleNotFound if there is none of that name.
func ResumeSchedule(ctx context.Context, client queuev1.QueueServiceClient, queue, name string) (*queuev1.Schedule, error) {
	resp, err := client.ResumeSchedule(ctx, &queuev1.ResumeScheduleRequest{Queue: queue, Name: name})
	if err != nil {
		return nil, fmt.Errorf("concord: resume schedule %q: %w", name, err)
	}
	return resp.GetSchedule(), nil
}

// DeleteSchedule removes the schedule; the tasks it enqueued stay. The error
// wraps ErrScheduleNotFound if there is none of that name.
func DeleteSchedule(ctx context.Context, client queuev1.QueueServiceClient, queue, name string) error {
	if _, err := client.DeleteSchedule(ctx, &queuev1.DeleteScheduleRequest{Queue: queue, Name: name}); err != nil {
		return fmt.Errorf("concord: delete schedule %q: %w", name, err)
	}
	return nil
}

// GetSchedule reports the schedule: its spec, whether it is paused, its next tick
// (NextRunAt, unset while paused), its last run and how many tasks it enqueued.
// The error wraps ErrScheduleNotFound if there is none of that name.
func GetSchedule(ctx context.Context, client queuev1.QueueServiceClient, queue, name string) (*queuev1.Schedule, error) {
	resp, err := client.GetSchedule(ctx, &queuev1.GetScheduleRequest{Queue: queue, Name: name})
	if err != nil {
		return nil, fmt.Errorf("concord: get schedule %q: %w", name, err)
	}
	return resp.GetSchedule(), nil
}

// ListSchedules returns all of the queue's schedules, soonest next tick first and
// paused ones last, reading them page by page. A queue without schedules gives
// none and no error. Pages follow the tick order, which ticks change while they
// are read: a schedule that ticks between two pages can come again in a later
// page, and is listed once here.
func ListSchedules(ctx context.Context, client queuev1.QueueServiceClient, queue string) ([]*queuev1.Schedule, error) {
	var all []*queuev1.Schedule
	seen := map[string]bool{}
	req := &queuev1.ListSchedulesRequest{Queue: queue}
	for {
		resp, err := client.ListSchedules(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("concord: list schedules of queue %q: %w", queue, err)
		}
		for _, s := range resp.GetSchedules() {
			if !seen[s.GetName()] {
				seen[s.GetName()] = true
				all = append(all, s)
			}
		}
		if resp.GetNextPageToken() == "" {
			return all, nil
		}
		req = &queuev1.ListSchedulesRequest{Queue: queue, PageToken: resp.GetNextPageToken()}
	}
}
