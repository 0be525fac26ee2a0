// Command etcdlock is the etcd side of the bench's handoff scenario
// (bench/scenarios/handoff.py): the same workload handoff_clients.py runs for the
// other implementations, driven the way Go users drive an etcd lock: one
// clientv3.Client per process, and per client (a goroutine) its own
// concurrency.Session (a lease kept alive by the client) and a
// concurrency.NewMutex on the one lock key.
//
// Every client loops until end_at: acq_start, Lock (context timeout = -wait),
// acq_end, hold -hold seconds, rel_sent, Unlock, rel_end, think -think seconds.
// Times are CLOCK_MONOTONIC in seconds, the clock of Python's time.monotonic(), so
// the bench can merge them with its own.
//
// Protocol with the bench: after connecting and opening every session, it prints
// "ready" on stdout and reads one line "start_at end_at" from stdin (unless both
// are given with -start-at and -end-at). At the end it prints one JSON object,
// shaped like a handoff_clients.py report:
//
//	{"events": [[client, acq_start, acq_end, rel_sent, rel_end], ...],
//	 "client_cpu_busy": cpu seconds of this process / window, "errors": n}
//
// A timed-out acquire has NaN for rel_sent and rel_end (Python's json reads NaN).
// Errors other than a timed-out Lock are counted, logged on stderr, and end that
// client's loop.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
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
	hold, think, wait time.Duration
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
	fmt.Fprintf(os.Stderr, "etcdlock: client %d: %s: %v\n", cid, what, err)
	r.mu.Lock()
	r.errors++
	r.mu.Unlock()
}

func runClient(cid int, m *concurrency.Mutex, cfg config, out *results) {
	sleepUntil(cfg.startAt)
	nan := math.NaN()
	for now() < cfg.endAt {
		t0 := now()
		ctx, cancel := context.WithTimeout(context.Background(), cfg.wait)
		err := m.Lock(ctx)
		cancel()
		t1 := now()
		if err != nil {
			out.add(event{float64(cid), t0, t1, nan, nan})
			if !errors.Is(err, context.DeadlineExceeded) {
				out.fail(cid, "Lock", err)
				return
			}
			continue
		}
		time.Sleep(cfg.hold)
		t2 := now()
		err = m.Unlock(context.Background())
		out.add(event{float64(cid), t0, t1, t2, now()})
		if err != nil {
			out.fail(cid, "Unlock", err)
			return
		}
		time.Sleep(cfg.think)
	}
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
	endpoint := flag.String("endpoint", "http://127.0.0.1:2379", "etcd client URL")
	key := flag.String("key", "bench:handoff:etcd", "the lock's key prefix")
	clients := flag.String("clients", "0", "comma-separated ids of the clients this process runs")
	hold := flag.Float64("hold", 0.002, "seconds to hold the lock")
	think := flag.Float64("think", 0.005, "seconds between a release and the next acquire")
	wait := flag.Float64("wait", 30, "acquire timeout, seconds")
	ttl := flag.Int("ttl", 10, "session lease TTL, seconds")
	startAt := flag.Float64("start-at", math.NaN(), "CLOCK_MONOTONIC second to start at (else read from stdin)")
	endAt := flag.Float64("end-at", math.NaN(), "CLOCK_MONOTONIC second to stop at (else read from stdin)")
	flag.Parse()

	ids, err := parseClients(*clients)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock:", err)
		os.Exit(2)
	}
	logger, _ := zap.NewProduction(zap.IncreaseLevel(zap.WarnLevel))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second, Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock: connect:", err)
		os.Exit(1)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := cli.Get(ctx, *key); err != nil { // connected before the clock starts
		fmt.Fprintln(os.Stderr, "etcdlock: first Get:", err)
		os.Exit(1)
	}
	cancel()
	sessions := make([]*concurrency.Session, len(ids))
	mutexes := make([]*concurrency.Mutex, len(ids))
	for i := range ids {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(*ttl))
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdlock: session:", err)
			os.Exit(1)
		}
		sessions[i] = s
		mutexes[i] = concurrency.NewMutex(s, *key)
	}

	cfg := config{hold: seconds(*hold), think: seconds(*think), wait: seconds(*wait),
		startAt: *startAt, endAt: *endAt}
	if math.IsNaN(cfg.startAt) || math.IsNaN(cfg.endAt) {
		fmt.Println("ready")
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdlock: reading start_at end_at:", err)
			os.Exit(1)
		}
		if _, err := fmt.Sscan(line, &cfg.startAt, &cfg.endAt); err != nil {
			fmt.Fprintf(os.Stderr, "etcdlock: bad start line %q: %v\n", line, err)
			os.Exit(1)
		}
	}

	out := &results{}
	var wg sync.WaitGroup
	for i, cid := range ids {
		wg.Add(1)
		go func(cid int, m *concurrency.Mutex) {
			defer wg.Done()
			runClient(cid, m, cfg, out)
		}(cid, mutexes[i])
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
	for _, s := range sessions {
		s.Close() // revokes the lease
	}
}
