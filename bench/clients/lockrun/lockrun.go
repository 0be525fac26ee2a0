// Package lockrun is what the bench's Go lock programs share (bench/peers/etcd_lock:
// etcd's concurrency.Mutex; bench/clients/go_lock: Concord's Go client): their flags,
// the handshake with bench/lock_clients.py, the loop every client runs, the clock
// and the report. A program parses the flags, connects, and gives Run one Lock per
// client; all that differs between the programs is how a lock is taken.
//
// Every client loops until end_at: acq_start, acquire (waiting up to -wait),
// acq_end, hold -hold seconds, rel_sent, release, rel_end, think -think seconds.
// Times are CLOCK_MONOTONIC in seconds, the clock of Python's time.monotonic(), so
// the bench can merge them with its own.
//
// Protocol with the bench: once connected, the program prints "ready" on stdout
// and reads one line "start_at end_at" from stdin (unless both are given with
// -start-at and -end-at). At the end it prints one JSON object, shaped like a
// handoff_clients.py report:
//
//	{"events": [[client, acq_start, acq_end, rel_sent, rel_end], ...],
//	 "client_cpu_busy": cpu seconds of this process / window, "errors": n}
//
// An acquire not had in time has NaN for rel_sent and rel_end (Python's json reads
// NaN). Errors are counted, logged on stderr, and end that client's loop.
package lockrun

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Lock is one client's lock. Acquire waits up to wait for it and returns how to
// release it; a nil release with a nil error means it was not had in time.
type Lock func(wait time.Duration) (release func() error, err error)

// Flags are the command line every lock program takes.
type Flags struct {
	Endpoint, Key     string
	Clients           []int
	Hold, Think, Wait time.Duration
	TTL               time.Duration // the lock's (or session lease's) time to live
	startAt, endAt    float64
}

// Parse reads the flags; name prefixes messages, endpoint and key are the defaults.
func Parse(name, endpoint, key string) Flags {
	ep := flag.String("endpoint", endpoint, "the server to connect to")
	k := flag.String("key", key, "the lock's name (or key prefix)")
	clients := flag.String("clients", "0", "comma-separated ids of the clients this process runs")
	hold := flag.Float64("hold", 0.002, "seconds to hold the lock")
	think := flag.Float64("think", 0.005, "seconds between a release and the next acquire")
	wait := flag.Float64("wait", 30, "acquire timeout, seconds")
	ttl := flag.Float64("ttl", 10, "the lock's TTL, seconds")
	startAt := flag.Float64("start-at", math.NaN(), "CLOCK_MONOTONIC second to start at (else read from stdin)")
	endAt := flag.Float64("end-at", math.NaN(), "CLOCK_MONOTONIC second to stop at (else read from stdin)")
	flag.Parse()
	var ids []int
	for _, f := range strings.Split(*clients, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad -clients %q: %v\n", name, *clients, err)
			os.Exit(2)
		}
		ids = append(ids, id)
	}
	return Flags{Endpoint: *ep, Key: *k, Clients: ids, Hold: seconds(*hold), Think: seconds(*think),
		Wait: seconds(*wait), TTL: seconds(*ttl), startAt: *startAt, endAt: *endAt}
}

// Run waits for the common start (the handshake, then started() if not nil: the
// moment to reopen whatever went idle while the bench got ready), runs lockOf(id)'s
// loop for every client in a goroutine, and prints the report.
func Run(name string, f Flags, lockOf func(client int) Lock, started func()) {
	if math.IsNaN(f.startAt) || math.IsNaN(f.endAt) {
		fmt.Println("ready")
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: reading start_at end_at: %v\n", name, err)
			os.Exit(1)
		}
		if _, err := fmt.Sscan(line, &f.startAt, &f.endAt); err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad start line %q: %v\n", name, line, err)
			os.Exit(1)
		}
	}
	if started != nil {
		started()
	}
	out := &results{name: name}
	var wg sync.WaitGroup
	for _, cid := range f.Clients {
		wg.Add(1)
		go func(cid int, lock Lock) {
			defer wg.Done()
			loop(cid, lock, f, out)
		}(cid, lockOf(cid))
	}
	sleepUntil(f.startAt)
	cpu0 := cpuSeconds()
	wg.Wait()
	cpu := cpuSeconds() - cpu0
	busy := math.NaN()
	if window := now() - f.startAt; window > 0 {
		busy = cpu / window
	}
	os.Stdout.Write(out.report(busy))
}

func loop(cid int, lock Lock, f Flags, out *results) {
	sleepUntil(f.startAt)
	nan := math.NaN()
	for now() < f.endAt {
		t0 := now()
		release, err := lock(f.Wait)
		t1 := now()
		if err != nil || release == nil {
			out.add(event{float64(cid), t0, t1, nan, nan})
			if err != nil {
				out.fail(cid, "acquire", err)
				return
			}
			continue
		}
		time.Sleep(f.Hold)
		t2 := now()
		err = release()
		out.add(event{float64(cid), t0, t1, t2, now()})
		if err != nil {
			out.fail(cid, "release", err)
			return
		}
		time.Sleep(f.Think)
	}
}

type event [5]float64 // client, acq_start, acq_end, rel_sent, rel_end

type results struct {
	name   string
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
	fmt.Fprintf(os.Stderr, "%s: client %d: %s: %v\n", r.name, cid, what, err)
	r.mu.Lock()
	r.errors++
	r.mu.Unlock()
}

func (r *results) report(busy float64) []byte {
	b := []byte(`{"events": [`)
	for i, e := range r.events {
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
	b = strconv.AppendInt(b, int64(r.errors), 10)
	return append(b, "}\n"...)
}

func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) {
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

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
