// Command golock is the Concord Go client's side of the bench's handoff scenario
// (bench/scenarios/handoff.py): the workload handoff_clients.py runs for the
// other implementations, with the protocol of the etcd peer's program
// (bench/peers/etcd_lock/main.go), driven the way Go users drive a Concord lock:
// one grpc.ClientConn and one concord.LockSession (one LockService.Session
// stream) per process, and per client a goroutine looping on the one lock.
//
// Every client loops until end_at: acq_start, Acquire (wait_timeout = -wait),
// acq_end, hold -hold seconds, rel_sent, Release, rel_end, think -think seconds.
// Acquire and Release are the session's own (one message each way on the
// stream), not concord.Lock and Lease.Unlock: Lock starts a renewal keeper per
// acquisition (a goroutine and a timer, stopped again by Unlock), a cost per
// acquisition that the other implementations' loops do not pay; with -hold far
// below -ttl nothing needs renewing. Times are CLOCK_MONOTONIC in seconds, the
// clock of Python's time.monotonic(), so the bench can merge them with its own.
//
// Protocol with the bench: after connecting and opening the lock session, it
// prints "ready" on stdout and reads one line "start_at end_at" from stdin
// (unless both are given with -start-at and -end-at). At the end it prints one
// JSON object, shaped like a handoff_clients.py report:
//
//	{"events": [[client, acq_start, acq_end, rel_sent, rel_end], ...],
//	 "client_cpu_busy": cpu seconds of this process / window, "errors": n}
//
// A timed-out acquire (acquired false) has NaN for rel_sent and rel_end
// (Python's json reads NaN). Errors are counted, logged on stderr, and end that
// client's loop.
//
//	cd bench/clients/go_lock && go build -o golock . && ./golock -endpoint 127.0.0.1:50051 \
//	  -key bench:handoff:go -clients 0,1,2,3 -hold 0.002 -think 0.005 -wait 30 -ttl 10
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"go.concord.dev/concord"
	lockv1 "go.concord.dev/concord/gen/concord/lock/v1"
)

type event [5]float64 // client, acq_start, acq_end, rel_sent, rel_end

// now reads CLOCK_MONOTONIC, the clock of Python's time.monotonic() on Linux.
func now() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return float64(ts.Sec) + float64(ts.Nsec)*1e-9
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sleepUntil(t float64) {
	if d := t - now(); d > 0 {
		time.Sleep(seconds(d))
	}
}

// cpuSeconds is this process's user + system CPU time, every thread.
func cpuSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	tv := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)*1e-6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

type config struct {
	key               string
	hold, think, wait time.Duration
	ttl               time.Duration
	startAt, endAt    float64
}

type results struct {
	mu     sync.Mutex
	events []event
	errors int
}

func (r *results) add(e event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *results) fail(cid int, what string, err error) {
	fmt.Fprintf(os.Stderr, "golock: client %d: %s: %v\n", cid, what, err)
	r.mu.Lock()
	r.errors++
	r.mu.Unlock()
}

// callMargin is how long past the server-side wait a call may take to answer.
const callMargin = 10 * time.Second

func runClient(cid int, s *concord.LockSession, cfg config, out *results) {
	sleepUntil(cfg.startAt)
	nan := math.NaN()
	acquire := &lockv1.AcquireRequest{Name: cfg.key, Ttl: durationpb.New(cfg.ttl), WaitTimeout: durationpb.New(cfg.wait)}
	for now() < cfg.endAt {
		t0 := now()
		ctx, cancel := context.WithTimeout(context.Background(), cfg.wait+callMargin)
		got, err := s.Acquire(ctx, acquire)
		cancel()
		t1 := now()
		if err != nil {
			out.add(event{float64(cid), t0, t1, nan, nan})
			out.fail(cid, "Acquire", err)
			return
		}
		if !got.GetAcquired() {
			out.add(event{float64(cid), t0, t1, nan, nan})
			continue
		}
		time.Sleep(cfg.hold)
		t2 := now()
		ctx, cancel = context.WithTimeout(context.Background(), callMargin)
		_, err = s.Release(ctx, &lockv1.ReleaseRequest{Name: cfg.key, Lease: got.GetLease()})
		cancel()
		out.add(event{float64(cid), t0, t1, t2, now()})
		if err != nil {
			out.fail(cid, "Release", err)
			return
		}
		time.Sleep(cfg.think)
	}
}

// warmUp connects and opens the lock session before the clock starts: a Refresh
// of no lease goes over the session, and LOCK_NOT_HELD (any answer of the
// server's) shows it open.
func warmUp(s *concord.LockSession, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.Refresh(ctx, &lockv1.RefreshRequest{Name: key, Lease: "bench-warm-up", Ttl: durationpb.New(time.Second)})
	if err != nil && concord.Reason(err) == "" {
		return err
	}
	return nil
}

func parseClients(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bad -clients %q: %w", s, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) {
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func report(events []event, busy float64, errs int) []byte {
	b := []byte(`{"events": [`)
	for i, e := range events {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(e[0]), 10)
		for _, v := range e[1:] {
			b = append(b, ", "...)
			b = appendFloat(b, v)
		}
		b = append(b, ']')
	}
	b = append(b, `], "client_cpu_busy": `...)
	b = appendFloat(b, busy)
	b = append(b, `, "errors": `...)
	b = strconv.AppendInt(b, int64(errs), 10)
	return append(b, "}\n"...)
}

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:50051", "the Concord server, host:port")
	key := flag.String("key", "bench:handoff:concord-go", "the lock's name")
	clients := flag.String("clients", "0", "comma-separated ids of the clients this process runs")
	hold := flag.Float64("hold", 0.002, "seconds to hold the lock")
	think := flag.Float64("think", 0.005, "seconds between a release and the next acquire")
	wait := flag.Float64("wait", 30, "acquire timeout (wait_timeout), seconds")
	ttl := flag.Float64("ttl", 10, "lock TTL, seconds")
	startAt := flag.Float64("start-at", math.NaN(), "CLOCK_MONOTONIC second to start at (else read from stdin)")
	endAt := flag.Float64("end-at", math.NaN(), "CLOCK_MONOTONIC second to stop at (else read from stdin)")
	flag.Parse()

	ids, err := parseClients(*clients)
	if err != nil {
		fmt.Fprintln(os.Stderr, "golock:", err)
		os.Exit(2)
	}
	// Plaintext, as concord-server listens by default; errors become *concord.Error
	// in the session itself, and it retries as the Client's connection would.
	conn, err := grpc.NewClient(*endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "golock: connect:", err)
		os.Exit(1)
	}
	defer conn.Close()
	session := concord.NewLockSession(lockv1.NewLockServiceClient(conn))
	defer session.Close()
	if err := warmUp(session, *key); err != nil {
		fmt.Fprintln(os.Stderr, "golock: connect:", err)
		os.Exit(1)
	}

	cfg := config{key: *key, hold: seconds(*hold), think: seconds(*think), wait: seconds(*wait), ttl: seconds(*ttl),
		startAt: *startAt, endAt: *endAt}
	if math.IsNaN(cfg.startAt) || math.IsNaN(cfg.endAt) {
		fmt.Println("ready")
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			fmt.Fprintln(os.Stderr, "golock: reading start_at end_at:", err)
			os.Exit(1)
		}
		if _, err := fmt.Sscan(line, &cfg.startAt, &cfg.endAt); err != nil {
			fmt.Fprintf(os.Stderr, "golock: bad start line %q: %v\n", line, err)
			os.Exit(1)
		}
		// The stream may have ended while the bench got ready: reopen it now, not
		// with the first timed acquire.
		if err := warmUp(session, *key); err != nil {
			fmt.Fprintln(os.Stderr, "golock: warm-up:", err)
		}
	}

	out := &results{}
	var wg sync.WaitGroup
	for _, cid := range ids {
		wg.Add(1)
		go func(cid int) {
			defer wg.Done()
			runClient(cid, session, cfg, out)
		}(cid)
	}
	sleepUntil(cfg.startAt)
	cpu0 := cpuSeconds()
	wg.Wait()
	cpu := cpuSeconds() - cpu0
	busy := math.NaN()
	if window := now() - cfg.startAt; window > 0 {
		busy = cpu / window
	}
	os.Stdout.Write(report(out.events, busy, out.errors))
}
