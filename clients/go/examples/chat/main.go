// Command chat sends messages to a Concord chat as one of its members, one
// message per argument, and prints each message's id:
//
//	go run ./examples/chat -addr 127.0.0.1:50051 -chat 7 -sender jeff "Hey Joe" "Where to?"
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"go.concord.dev/concord"
	chatv1 "go.concord.dev/concord/gen/concord/chat/v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "concord-server address")
	chat := flag.String("chat", "", "chat id")
	sender := flag.String("sender", "", "a member of the chat")
	flag.Parse()

	client, err := concord.NewClient(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// One at a time: each send is acknowledged before the next, so ids follow argument order.
	for _, body := range flag.Args() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := client.Chat.SendMessage(ctx, &chatv1.SendMessageRequest{ChatId: *chat, Sender: *sender, Body: body})
		cancel()
		if err != nil {
			log.Fatalf("send %q: %v (reason %s)", body, err, concord.Reason(err))
		}
		fmt.Println(resp.GetMessageId())
	}
}
