// The scenario side of interop-go: a scenario's producer group and one consumer of a consumer
// group (mqadmin scenario run, `client: go`), printing one JSON line per send, consumption and
// change of allocated queues, in the same shape as the Java harness's ScenarioProducer and
// ScenarioConsumer (see their comments for the lines and the stdin protocol: "go" starts,
// "stop" or the end of stdin stops).
//
//	interop-go scenario-produce -namesrv "H:P;H:P" -group G -topic T [-topic T2] -producers N -rate R -seconds S
//	        [-size 256] [-timeout-ms 3000] [-retries 2] [-tls] [-access-key AK -secret-key SK]
//	interop-go scenario-consume -namesrv "H:P;H:P" -group G -topic T [-expression "*"] [-from last|first|timestamp]
//	        [-threads 20] [-batch 32] [-threshold 1000] [-delay-ms 0] [-failure-rate 0] [-tls] [-access-key ...]
//
// The Go client retries inside one SendSync and tells nobody, so a send reports "attempts": 1.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	mrand "math/rand"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// wallMillis is the wall clock in milliseconds with fractions (the runner's common timeline).
func wallMillis() float64 {
	return float64(time.Now().UnixNano()) / 1e6
}

// waitGo reads stdin until "go"; false when it ended first. The returned channel closes when stdin
// says "stop" or ends (the runner went away).
func waitGo() (bool, <-chan struct{}) {
	stop := make(chan struct{})
	lines := bufio.NewScanner(os.Stdin)
	if !lines.Scan() || lines.Text() != "go" {
		close(stop)
		return false, stop
	}
	go func() {
		for lines.Scan() && lines.Text() != "stop" {
		}
		close(stop)
	}()
	return true, stop
}

func namesrvList(addrs string) []string {
	return strings.Split(addrs, ";")
}

// clientFlags are the flags both scenario programs take: where the NameServers are, the group, how
// to connect, and the topics.
type clientFlags struct {
	namesrv     *string
	group       *string
	useTLS      *bool
	credentials func() *primitive.Credentials
	topics      multi
}

func declareClientFlags(fs *flag.FlagSet, role string) *clientFlags {
	c := &clientFlags{
		namesrv:     fs.String("namesrv", "", "NameServer addresses, ';' separated"),
		group:       fs.String("group", "", role+" group"),
		useTLS:      fs.Bool("tls", false, "connect with TLS (any server certificate is trusted)"),
		credentials: credentialFlags(fs),
	}
	fs.Var(&c.topics, "topic", "a topic (repeatable)")
	return c
}

func scenarioProduce(argv []string) error {
	fs := flag.NewFlagSet("scenario-produce", flag.ExitOnError)
	common := declareClientFlags(fs, "producer")
	count := fs.Int("producers", 1, "producers")
	rate := fs.Float64("rate", 1, "sends per second per producer")
	seconds := fs.Float64("seconds", 1, "seconds of sends")
	size := fs.Int("size", 256, "message body bytes")
	timeoutMs := fs.Int("timeout-ms", 3000, "send timeout")
	retries := fs.Int("retries", 2, "retries of a failed send")
	fs.Parse(argv)
	body := make([]byte, *size)
	rand.Read(body)
	producers := make([]rocketmq.Producer, 0, *count)
	defer func() {
		for _, p := range producers {
			p.Shutdown()
		}
	}()
	for i := 0; i < *count; i++ {
		options := []producer.Option{
			producer.WithNsResolver(primitive.NewPassthroughResolver(namesrvList(*common.namesrv))),
			producer.WithGroupName(*common.group),
			producer.WithInstanceName(fmt.Sprintf("scenario-producer-%d-%d", os.Getpid(), i)),
			producer.WithRetry(*retries),
			producer.WithSendMsgTimeout(time.Duration(*timeoutMs) * time.Millisecond),
			producer.WithInterceptor(lastQueue),
			producer.WithTls(*common.useTLS),
		}
		if creds := common.credentials(); creds != nil {
			options = append(options, producer.WithCredentials(*creds))
		}
		p, err := rocketmq.NewProducer(options...)
		if err != nil {
			return err
		}
		if err := p.Start(); err != nil {
			return err
		}
		producers = append(producers, p)
	}
	emit(map[string]any{"event": "ready"})
	started, stop := waitGo()
	if !started {
		return nil
	}
	end := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	var senders sync.WaitGroup
	for i, p := range producers {
		senders.Add(1)
		go func(index int, p rocketmq.Producer) {
			defer senders.Done()
			produceAtRate(index, p, common.topics, body, *rate, end, stop)
		}(i, p)
	}
	senders.Wait()
	emit(map[string]any{"event": "done"})
	return nil
}

// lastQueueKey holds, in a send's context, where lastQueue leaves the queue of the send's last attempt.
type lastQueueKey struct{}

// lastQueue is an interceptor: after a send, it copies the queue of its last attempt (which the client
// keeps in the producer context) for a failed send's line.
func lastQueue(ctx context.Context, req, reply interface{}, next primitive.Invoker) error {
	err := next(ctx, req, reply)
	holder, ok := ctx.Value(lastQueueKey{}).(*primitive.MessageQueue)
	if pc, found := primitive.GetProducerCtx(ctx); ok && found {
		*holder = pc.MQ
	}
	return err
}

func produceAtRate(index int, p rocketmq.Producer, topics []string, body []byte, rate float64, end time.Time,
	stop <-chan struct{}) {
	period := time.Duration(float64(time.Second) / rate)
	next := time.Now().Add(time.Duration(mrand.Int63n(int64(period) + 1)))
	for n := 0; ; n++ {
		wait := time.Until(next)
		if wait < -time.Second {
			next = time.Now() // more than a second behind: start over, do not burst
		}
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		if !next.Before(end) {
			return
		}
		sendOne(index, p, topics[n%len(topics)], body)
		next = next.Add(period)
	}
}

func sendOne(index int, p rocketmq.Producer, topic string, body []byte) {
	line := map[string]any{"event": "send", "p": index, "t": wallMillis(), "topic": topic, "attempts": 1}
	begin := time.Now()
	var last primitive.MessageQueue
	ctx := context.WithValue(context.Background(), lastQueueKey{}, &last)
	result, err := p.SendSync(ctx, primitive.NewMessage(topic, body))
	line["ms"] = float64(time.Since(begin).Nanoseconds()) / 1e6
	if err != nil {
		line["error"] = err.Error()
		line["code"] = -1
		if last.BrokerName != "" {
			line["broker"] = last.BrokerName
			line["queue"] = last.QueueId
		}
	} else {
		line["status"] = result.Status
		line["broker"] = result.MessageQueue.BrokerName
		line["queue"] = result.MessageQueue.QueueId
		line["offset"] = result.QueueOffset
		line["msgId"] = result.MsgID
	}
	emit(line)
}

func scenarioConsume(argv []string) error {
	fs := flag.NewFlagSet("scenario-consume", flag.ExitOnError)
	common := declareClientFlags(fs, "consumer")
	expression := fs.String("expression", "*", "tag expression")
	from := fs.String("from", "last", "last | first | timestamp")
	threads := fs.Int("threads", 20, "consuming goroutines")
	batch := fs.Int("batch", 32, "pull batch size")
	threshold := fs.Int64("threshold", 1000, "messages pulled ahead per queue")
	delayMs := fs.Int("delay-ms", 0, "time each message takes")
	failureRate := fs.Float64("failure-rate", 0, "share of consumptions answered RECONSUME_LATER")
	fs.Parse(argv)
	where := map[string]consumer.ConsumeFromWhere{
		"first": consumer.ConsumeFromFirstOffset, "timestamp": consumer.ConsumeFromTimestamp,
	}[*from]
	options := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver(namesrvList(*common.namesrv))),
		consumer.WithGroupName(*common.group),
		consumer.WithInstance(fmt.Sprintf("scenario-consumer-%d", os.Getpid())),
		consumer.WithConsumeFromWhere(where),
		consumer.WithConsumeGoroutineNums(*threads),
		consumer.WithPullBatchSize(int32(*batch)),
		consumer.WithPullThresholdForQueue(*threshold),
		consumer.WithStrategy(reportingAllocation()),
		consumer.WithTls(*common.useTLS),
	}
	if creds := common.credentials(); creds != nil {
		options = append(options, consumer.WithCredentials(*creds))
	}
	c, err := rocketmq.NewPushConsumer(options...)
	if err != nil {
		return err
	}
	listener := func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		retry := *failureRate > 0 && mrand.Float64() < *failureRate
		for _, m := range msgs {
			time.Sleep(time.Duration(*delayMs) * time.Millisecond)
			consumedLine(m, retry)
		}
		if retry {
			return consumer.ConsumeRetryLater, nil
		}
		return consumer.ConsumeSuccess, nil
	}
	for _, topic := range common.topics {
		selector := consumer.MessageSelector{Type: consumer.TAG, Expression: *expression}
		if err := c.Subscribe(topic, selector, listener); err != nil {
			return err
		}
	}
	emit(map[string]any{"event": "ready"})
	started, stop := waitGo()
	if !started {
		return nil
	}
	if err := c.Start(); err != nil {
		return err
	}
	emit(map[string]any{"event": "started", "t": wallMillis()})
	<-stop
	c.Shutdown()
	emit(map[string]any{"event": "stopped", "t": wallMillis()})
	return nil
}

func consumedLine(m *primitive.MessageExt, retry bool) {
	id := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
	if id == "" {
		id = m.MsgId
	}
	outcome := "ok"
	if retry {
		outcome = "retry"
	}
	line := map[string]any{"event": "consumed", "t": wallMillis(), "topic": m.Topic, "offset": m.QueueOffset,
		"msgId": id, "storeMs": m.StoreTimestamp, "outcome": outcome, "reconsume": m.ReconsumeTimes}
	if m.Queue != nil {
		line["broker"] = m.Queue.BrokerName
		line["queue"] = m.Queue.QueueId
	}
	emit(line)
}

// reportingAllocation is AllocateByAveragely, printing what it gives this consumer whenever that changes.
func reportingAllocation() consumer.AllocateStrategy {
	var mu sync.Mutex
	last := map[string]string{}
	return func(group, currentCID string, mqAll []*primitive.MessageQueue, cidAll []string) []*primitive.MessageQueue {
		mine := consumer.AllocateByAveragely(group, currentCID, mqAll, cidAll)
		if len(mqAll) == 0 {
			return mine
		}
		all, given := queuePairs(mqAll), queuePairs(mine)
		seen := fmt.Sprint(all, "/", given)
		topic := mqAll[0].Topic
		mu.Lock()
		changed := last[topic] != seen
		last[topic] = seen
		mu.Unlock()
		if changed {
			emit(map[string]any{"event": "allocate", "t": wallMillis(), "topic": topic, "all": all, "mine": given})
		}
		return mine
	}
}

func queuePairs(queues []*primitive.MessageQueue) [][]any {
	out := make([][]any, 0, len(queues))
	for _, q := range queues {
		out = append(out, []any{q.BrokerName, q.QueueId})
	}
	return out
}
