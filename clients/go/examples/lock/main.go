// Command lock takes a Concord lock and holds it, renewed in the background,
// until a line (or end of input) arrives on stdin, then releases it:
//
//	go run ./examples/lock -addr 127.0.0.1:50051 -name orders:42 -ttl 10s
//
// It prints "acquired <name> <fencing token>" once it holds the lock and
// "released <name>" after, so another program can follow along.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"go.concord.dev/concord"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "concord-server address")
	name := flag.String("name", "orders:42", "lock name")
	ttl := flag.Duration("ttl", 10*time.Second, "lock TTL; renewed every ttl/3 while held")
	wait := flag.Duration("wait", time.Minute, "how long to wait for the lock")
	owner := flag.String("owner", "go-example", "holder label shown by Describe")
	flag.Parse()

	client, err := concord.NewClient(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	lease, err := concord.Lock(ctx, client.Locks, *name, *ttl, concord.WithOwner(*owner))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired", *name, lease.FencingToken)

	lines := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		close(lines)
	}()
	select {
	case <-lines:
	case <-lease.Lost(): // stop protected work at once; Unlock reports the loss
	}
	if err := lease.Unlock(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released", *name)
}
