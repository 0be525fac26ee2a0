// Command etcdlock is the etcd side of the bench's handoff scenario
// (bench/scenarios/handoff.py): the same workload handoff_clients.py runs for the
// other implementations, driven the way Go users drive an etcd lock: one
// clientv3.Client per process, and per client (a goroutine) its own
// concurrency.Session (a lease kept alive by the client) and a
// concurrency.NewMutex on the one lock key.
//
// The loop (Lock with a context timeout of -wait, hold, Unlock, think), the flags,
// the handshake and the report are bench/clients/lockrun's; -ttl is each session
// lease's TTL, in whole seconds. A Lock that times out is "not had in time"; other
// errors are counted and end that client's loop.
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"concord.bench/lockrun"
)

// lockOf is one client's lock: its own session's Mutex on the one key.
func lockOf(m *concurrency.Mutex) lockrun.Lock {
	return func(wait time.Duration) (func() error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := m.Lock(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, nil
			}
			return nil, err
		}
		return func() error { return m.Unlock(context.Background()) }, nil
	}
}

func main() {
	f := lockrun.Parse("etcdlock", "http://127.0.0.1:2379", "bench:handoff:etcd")
	logger, _ := zap.NewProduction(zap.IncreaseLevel(zap.WarnLevel))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.Endpoint}, DialTimeout: 5 * time.Second, Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock: connect:", err)
		os.Exit(1)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := cli.Get(ctx, f.Key); err != nil { // connected before the clock starts
		fmt.Fprintln(os.Stderr, "etcdlock: first Get:", err)
		os.Exit(1)
	}
	cancel()
	ttl := int(math.Max(1, math.Round(f.TTL.Seconds())))
	locks := make(map[int]lockrun.Lock, len(f.Clients))
	var sessions []*concurrency.Session
	for _, cid := range f.Clients {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdlock: session:", err)
			os.Exit(1)
		}
		sessions = append(sessions, s)
		locks[cid] = lockOf(concurrency.NewMutex(s, f.Key))
	}
	lockrun.Run("etcdlock", f, func(cid int) lockrun.Lock { return locks[cid] }, nil)
	for _, s := range sessions {
		s.Close() // revokes the lease
	}
}
