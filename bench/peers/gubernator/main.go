// Command gubbench is both sides of the bench's rate-limit scenario
// (bench/scenarios/ratelimit.py) where Go is the fair client: it serves Gubernator
// (github.com/gubernator-io/gubernator, from the Go module proxy) as its own gRPC
// service, and it drives the same key mix against Gubernator or Concord.
//
//	gubbench serve -grpc ADDR -http ADDR -peers ADDR,ADDR,...
//	    one Gubernator daemon (its production defaults) that knows its peers; prints
//	    "ready" once listening and runs until stdin closes.
//	gubbench load -kind gubernator|concord|empty|stats -targets ADDR,... -batch B -conc C
//	    -seconds S -keys K -hot H -rate R -period-ms P [-global]
//	    C goroutines, each with its own target (round robin), call back to back for S
//	    seconds; each call decides B checks: 90% on the H hot keys, the rest on K cold
//	    ones, one hit each, limit R per P ms (Gubernator: TOKEN_BUCKET, with -global
//	    its GLOBAL behaviour; Concord: GCRA with burst R; empty: gRPC health Check on
//	    the first target, no decision; stats: Concord's QueueService Stats, the cheapest
//	    call that the tenant limits count). Prints one JSON object: calls, decisions,
//	    seconds, errors, latency percentiles (ms) and the hits allowed per key.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	queuev1 "go.concord.dev/concord/gen/concord/queue/v1"
	ratelimitv1 "go.concord.dev/concord/gen/concord/ratelimit/v1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gubbench serve|load ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "load":
		load(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: gubbench serve|load ...")
		os.Exit(2)
	}
}

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	grpcAddr := fs.String("grpc", "127.0.0.1:0", "gRPC listen address")
	httpAddr := fs.String("http", "127.0.0.1:0", "HTTP listen address")
	peers := fs.String("peers", "", "every node's gRPC address, this one's included")
	_ = fs.Parse(args)
	logrus.SetLevel(logrus.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	d, err := guber.SpawnDaemon(ctx, guber.DaemonConfig{
		Logger: logrus.WithField("instance", *grpcAddr), InstanceID: *grpcAddr,
		GRPCListenAddress: *grpcAddr, HTTPListenAddress: *httpAddr, AdvertiseAddress: *grpcAddr,
	})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "spawn:", err)
		os.Exit(1)
	}
	var infos []guber.PeerInfo
	for _, p := range strings.Split(*peers, ",") {
		if p != "" {
			infos = append(infos, guber.PeerInfo{GRPCAddress: p, IsOwner: p == *grpcAddr})
		}
	}
	if len(infos) == 0 {
		infos = []guber.PeerInfo{{GRPCAddress: *grpcAddr, IsOwner: true}}
	}
	d.SetPeers(infos)
	fmt.Println("ready")
	done := make(chan struct{})
	go func() { // ends when the bench closes stdin (or dies)
		buf := make([]byte, 1)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				close(done)
				return
			}
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
	d.Close()
}

type result struct {
	Calls     int            `json:"calls"`
	Decisions int            `json:"decisions"`
	Seconds   float64        `json:"seconds"`
	Errors    int            `json:"errors"`
	P50       float64        `json:"p50_ms"`
	P99       float64        `json:"p99_ms"`
	Allowed   map[string]int `json:"allowed"`
	FirstErr  string         `json:"first_error,omitempty"`
}

func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	kind := fs.String("kind", "concord", "gubernator | concord | empty")
	targets := fs.String("targets", "", "gRPC addresses, comma separated")
	batch := fs.Int("batch", 1, "checks per call")
	conc := fs.Int("conc", 16, "calls in flight")
	secs := fs.Float64("seconds", 5, "how long")
	keys := fs.Int("keys", 1000, "cold keys")
	hot := fs.Int("hot", 10, "hot keys (90% of checks)")
	rate := fs.Int64("rate", 100, "hits per period per key")
	periodMs := fs.Int64("period-ms", 1000, "the period")
	global := fs.Bool("global", false, "Gubernator: the GLOBAL behaviour")
	prefix := fs.String("prefix", "bench", "key prefix (a fresh one per run)")
	perSecond := fs.Float64("per-second", 0, "calls a second offered, spread over the goroutines (0: as fast as answered)")
	_ = fs.Parse(args)

	var conns []*grpc.ClientConn
	for _, t := range strings.Split(*targets, ",") {
		cc, err := grpc.NewClient(t, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			os.Exit(1)
		}
		conns = append(conns, cc)
	}
	var mu sync.Mutex
	res := result{Allowed: map[string]int{}}
	var lat []float64
	deadline := time.Now().Add(time.Duration(*secs * float64(time.Second)))
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < *conc; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			cc := conns[g%len(conns)]
			rng := rand.New(rand.NewSource(int64(g) + 1))
			gub := guber.NewV1Client(cc)
			con := ratelimitv1.NewRateLimitServiceClient(cc)
			health := grpc_health_v1.NewHealthClient(cc)
			queues := queuev1.NewQueueServiceClient(cc)
			mine := map[string]int{}
			var myLat []float64
			calls, decisions, errs := 0, 0, 0
			firstErr := ""
			names := make([]string, *batch)
			// At a fixed offered rate each goroutine's calls are due every conc/per-second
			// seconds, and a call's latency counts from when it was due (a late start is
			// the server's delay too: no coordinated omission).
			var every time.Duration
			if *perSecond > 0 {
				every = time.Duration(float64(*conc) / *perSecond * float64(time.Second))
			}
			due := start.Add(time.Duration(rng.Int63n(int64(every) + 1)))
			for time.Now().Before(deadline) {
				for i := range names {
					if rng.Intn(10) < 9 {
						names[i] = fmt.Sprintf("%s:hot:%d", *prefix, rng.Intn(*hot))
					} else {
						names[i] = fmt.Sprintf("%s:cold:%d", *prefix, rng.Intn(*keys))
					}
				}
				t0 := time.Now()
				if every > 0 {
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait)
					}
					t0 = due
					due = due.Add(every)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var allowed []bool
				var err error
				switch *kind {
				case "empty":
					_, err = health.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
				case "stats":
					_, err = queues.Stats(ctx, &queuev1.StatsRequest{Queue: *prefix})
				case "gubernator":
					req := &guber.GetRateLimitsReq{}
					behavior := guber.Behavior_BATCHING
					if *global {
						behavior = guber.Behavior_GLOBAL
					}
					for _, n := range names {
						req.Requests = append(req.Requests, &guber.RateLimitReq{Name: "bench", UniqueKey: n, Hits: 1,
							Limit: *rate, Duration: *periodMs, Algorithm: guber.Algorithm_TOKEN_BUCKET, Behavior: behavior})
					}
					var r *guber.GetRateLimitsResp
					r, err = gub.GetRateLimits(ctx, req)
					if err == nil {
						for _, x := range r.Responses {
							if x.Error != "" && err == nil {
								err = fmt.Errorf("%s", x.Error)
							}
							allowed = append(allowed, x.Status == guber.Status_UNDER_LIMIT)
						}
					}
				default:
					req := &ratelimitv1.CheckManyRequest{}
					for _, n := range names {
						req.Checks = append(req.Checks, &ratelimitv1.CheckRequest{Key: n, Hits: 1, Limit: &ratelimitv1.Limit{
							Rate: uint64(*rate), Period: durationpb.New(time.Duration(*periodMs) * time.Millisecond)}})
					}
					var r *ratelimitv1.CheckManyResponse
					r, err = con.CheckMany(ctx, req)
					if err == nil {
						for _, x := range r.Results {
							allowed = append(allowed, x.Allowed)
						}
					}
				}
				cancel()
				myLat = append(myLat, float64(time.Since(t0).Microseconds())/1000)
				calls++
				if err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					continue
				}
				if *kind != "empty" && *kind != "stats" {
					decisions += len(allowed)
					for i, ok := range allowed {
						if ok {
							mine[names[i]]++
						}
					}
				}
			}
			mu.Lock()
			res.Calls += calls
			res.Decisions += decisions
			res.Errors += errs
			if res.FirstErr == "" {
				res.FirstErr = firstErr
			}
			for k, v := range mine {
				res.Allowed[k] += v
			}
			lat = append(lat, myLat...)
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	sort.Float64s(lat)
	if len(lat) > 0 {
		res.P50 = lat[len(lat)/2]
		res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}
