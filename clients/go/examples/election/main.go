// Command election campaigns in a Concord election and leads, the leadership
// kept alive on a Lead stream, until a line (or end of input) arrives on stdin,
// then resigns:
//
//	go run ./examples/election -addr 127.0.0.1:50051 -name scheduler -value 10.0.0.7:8080
//
// It prints "elected <name> <term>" once it leads and "resigned <name>" after,
// so another program can follow along; if the leadership is lost meanwhile it
// says why and exits 1. A process that dies while leading ends its stream, which
// hands leadership to the next candidate at once.
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
	name := flag.String("name", "scheduler", "election name")
	value := flag.String("value", "", "the value the leader publishes")
	ttl := flag.Duration("ttl", concord.DefaultElectionTTL, "how long the leadership lasts without a renewal")
	wait := flag.Duration("wait", time.Minute, "how long to wait to be elected")
	candidate := flag.String("candidate", "go-example", "the candidate's label that observers see")
	flag.Parse()

	client, err := concord.NewClient(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	l, err := client.Election(*name).Campaign(ctx, []byte(*value), concord.WithTTL(*ttl), concord.WithOwner(*candidate))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("elected", *name, l.Term)

	lines := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		close(lines)
	}()
	select {
	case <-lines:
	case <-l.Done(): // stop leading at once; Resign reports the loss
	}
	if err := l.Resign(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("resigned", *name)
}
