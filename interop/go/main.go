// Command interop-go is the Go side of the interop suite: a producer and a push consumer built on
// the Apache Go client (github.com/apache/rocketmq-client-go/v2), driven by tests/interop and
// printing one JSON object per line on stdout (the client's own log goes to stderr).
//
//	interop-go produce -namesrv H:P -topic T -msg "body=a-0;tag=TagA;keys=k1 k2;prop.color=red" ...
//	interop-go consume -namesrv H:P -topic T -group G -expression "TagA || TagB" -expect N [-seconds 60]
//	interop-go scenario-produce ... / scenario-consume ...   (a scenario's clients: see scenario.go)
//
// Both take -access-key/-secret-key: the client then signs every request (the Go client's ACL
// credentials, the same HMAC-SHA1 signature as Java's AclClientRPCHook).
//
// A -msg is fields name=value separated by ';' (the same format as the Java harness's Producer).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// multi collects a repeatable flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

var stdout sync.Mutex

// emit prints one JSON line; lines of concurrent consumer goroutines never interleave.
func emit(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		line, _ = json.Marshal(map[string]any{"event": "encode-error", "error": err.Error()})
	}
	stdout.Lock()
	defer stdout.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func main() {
	rlog.SetLogLevel("error")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: interop-go produce|consume|scenario-produce|scenario-consume [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(os.Args[2:])
	case "consume":
		err = consume(os.Args[2:])
	case "scenario-produce":
		err = scenarioProduce(os.Args[2:])
	case "scenario-consume":
		err = scenarioConsume(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop-go:", err)
		os.Exit(1)
	}
}

// parseMessage reads a -msg spec into a message of topic.
func parseMessage(topic, spec string) (*primitive.Message, error) {
	msg := primitive.NewMessage(topic, nil)
	for _, part := range strings.Split(spec, ";") {
		name, value, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("bad -msg field %q", part)
		}
		switch {
		case name == "body":
			msg.Body = []byte(value)
		case name == "tag":
			msg.WithTag(value)
		case name == "keys":
			msg.WithKeys(strings.Fields(value))
		case strings.HasPrefix(name, "prop."):
			msg.WithProperty(strings.TrimPrefix(name, "prop."), value)
		default:
			return nil, fmt.Errorf("unknown -msg field %q", name)
		}
	}
	return msg, nil
}

// credentialFlags adds -access-key/-secret-key to fs; the returned function reads them after Parse
// (nil when no access key was given: an unsigned client).
func credentialFlags(fs *flag.FlagSet) func() *primitive.Credentials {
	accessKey := fs.String("access-key", "", "ACL access key (sign every request)")
	secretKey := fs.String("secret-key", "", "ACL secret key")
	return func() *primitive.Credentials {
		if *accessKey == "" {
			return nil
		}
		return &primitive.Credentials{AccessKey: *accessKey, SecretKey: *secretKey}
	}
}

func produce(argv []string) error {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	namesrv := fs.String("namesrv", "", "NameServer host:port")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "interop_go_producer", "producer group")
	credentials := credentialFlags(fs)
	var msgs multi
	fs.Var(&msgs, "msg", "a message spec (repeatable)")
	fs.Parse(argv)
	options := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		producer.WithGroupName(*group),
		producer.WithRetry(2),
	}
	if creds := credentials(); creds != nil {
		options = append(options, producer.WithCredentials(*creds))
	}
	p, err := rocketmq.NewProducer(options...)
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown()
	failed := 0
	for _, spec := range msgs {
		msg, err := parseMessage(*topic, spec)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		result, err := p.SendSync(ctx, msg)
		cancel()
		if err != nil {
			failed++
			emit(map[string]any{"event": "send-failed", "body": string(msg.Body), "error": err.Error()})
			continue
		}
		if result.Status != primitive.SendOK {
			failed++
		}
		emit(map[string]any{
			"event": "sent", "body": string(msg.Body), "status": result.Status, "msgId": result.MsgID,
			"offsetMsgId": result.OffsetMsgID, "broker": result.MessageQueue.BrokerName,
			"queueId": result.MessageQueue.QueueId, "queueOffset": result.QueueOffset,
		})
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d sends failed", failed, len(msgs))
	}
	return nil
}

func consume(argv []string) error {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	namesrv := fs.String("namesrv", "", "NameServer host:port")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	expression := fs.String("expression", "*", "tag expression")
	expect := fs.Int("expect", 1, "stop after this many messages")
	seconds := fs.Int("seconds", 60, "give up after this many seconds")
	linger := fs.Duration("linger", 0, "keep consuming this long after the last expected message")
	credentials := credentialFlags(fs)
	fs.Parse(argv)
	var mu sync.Mutex
	received := 0
	done := make(chan struct{})
	options := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		consumer.WithGroupName(*group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	if creds := credentials(); creds != nil {
		options = append(options, consumer.WithCredentials(*creds))
	}
	c, err := rocketmq.NewPushConsumer(options...)
	if err != nil {
		return err
	}
	selector := consumer.MessageSelector{Type: consumer.TAG, Expression: *expression}
	err = c.Subscribe(*topic, selector, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			emit(map[string]any{
				"event": "received", "topic": m.Topic, "tags": m.GetTags(), "keys": m.GetKeys(),
				"body": string(m.Body), "properties": m.GetProperties(), "msgId": m.MsgId,
				"queueId": m.Queue.QueueId, "queueOffset": m.QueueOffset, "reconsumeTimes": m.ReconsumeTimes,
			})
			mu.Lock()
			received++
			if received == *expect {
				close(done)
			}
			mu.Unlock()
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	emit(map[string]any{"event": "ready", "group": *group})
	ok := true
	select {
	case <-done:
	case <-time.After(time.Duration(*seconds) * time.Second):
		ok = false
	}
	time.Sleep(*linger)
	c.Shutdown()
	mu.Lock()
	emit(map[string]any{"event": "summary", "ok": ok, "received": received})
	mu.Unlock()
	if !ok {
		return errors.New("not every expected message arrived")
	}
	return nil
}
