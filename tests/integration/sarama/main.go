// A sarama 1.22 client (Debian 12's golang-github-shopify-sarama-dev) driven by
// tests/integration/test_sarama.py. Each subcommand prints JSON lines on stdout.
//
// Settings stay at sarama's defaults unless a subcommand says why: the point is
// what an operator running Debian's own Go tools gets. Under the default Version
// (0.8.2) sarama speaks the request versions Kafka 4 removed: Produce v0,
// ListOffsets v0, FindCoordinator v0, OffsetCommit v1, OffsetFetch v1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

func emit(fields map[string]interface{}) {
	line, err := json.Marshal(fields)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(line))
}

func fail(err error) {
	emit(map[string]interface{}{"event": "error", "error": err.Error()})
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sarama-client produce|group|commit|committed|offsets [flags]")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	brokers := flags.String("brokers", "127.0.0.1:9092", "bootstrap host:port list, comma separated")
	topic := flags.String("topic", "", "topic")
	group := flags.String("group", "", "consumer group")
	count := flags.Int("count", 10, "messages to produce, or to consume in total")
	idempotent := flags.Bool("idempotent", false, "idempotent lz4 producer (Version 0.11)")
	offset := flags.Int64("offset", 0, "offset to commit")
	timestamp := flags.Int64("timestamp", 0, "timestamp (ms) to look up")
	partitions := flags.Int("partitions", 1, "partitions of the topic")
	timeout := flags.Duration("timeout", 60*time.Second, "give up after this long")
	if err := flags.Parse(os.Args[2:]); err != nil {
		fail(err)
	}
	addrs := strings.Split(*brokers, ",")
	switch os.Args[1] {
	case "produce":
		produce(addrs, *topic, *count, *idempotent)
	case "group":
		consumeInGroup(addrs, *topic, *group, *count, *timeout)
	case "commit":
		commit(addrs, *topic, *group, *partitions, *offset)
	case "committed":
		committed(addrs, *topic, *group, *partitions)
	case "offsets":
		offsets(addrs, *topic, *partitions, *timestamp)
	default:
		fail(fmt.Errorf("unknown subcommand %q", os.Args[1]))
	}
}

// produce sends count messages keyed "key-<i>" (spread over the partitions by
// sarama's hash partitioner). Idempotence needs Version >= 0.11, acks=all and
// one request in flight (sarama refuses the config otherwise); without it the
// producer keeps the default Version and sends Produce v0 message sets.
func produce(addrs []string, topic string, count int, idempotent bool) {
	config := sarama.NewConfig()
	config.Producer.Return.Successes = true // a SyncProducer needs it
	if idempotent {
		config.Version = sarama.V0_11_0_0
		config.Producer.Idempotent = true
		config.Producer.RequiredAcks = sarama.WaitForAll
		config.Net.MaxOpenRequests = 1
		config.Producer.Compression = sarama.CompressionLZ4
	}
	producer, err := sarama.NewSyncProducer(addrs, config)
	if err != nil {
		fail(err)
	}
	defer producer.Close()
	for i := 0; i < count; i++ {
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("key-%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("value-%d", i))}
		partition, at, err := producer.SendMessage(msg)
		if err != nil {
			fail(err)
		}
		emit(map[string]interface{}{"event": "produced", "value": fmt.Sprintf("value-%d", i),
			"partition": partition, "offset": at})
	}
}

// member is one consumer of the group; consumed values are collected in seen.
type member struct {
	id      int
	barrier *barrier
	mu      *sync.Mutex
	seen    map[string]int // value -> member id
	total   *int
	want    int
	done    context.CancelFunc
}

// barrier holds consumption until both members are in the same generation with
// partitions each: otherwise the first member to join could read everything
// before the second arrives, and the group would never be seen with two members.
type barrier struct {
	mu     sync.Mutex
	claims map[int]string // member -> "generation:partitions"
	gens   map[int]int32
}

func (b *barrier) set(id int, generation int32, claims string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims[id], b.gens[id] = claims, generation
}

func (b *barrier) ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.gens) == 2 && b.gens[0] == b.gens[1] && b.claims[0] != "" && b.claims[1] != ""
}

func (m *member) Setup(session sarama.ConsumerGroupSession) error {
	var parts []int
	for _, ps := range session.Claims() {
		for _, p := range ps {
			parts = append(parts, int(p))
		}
	}
	sort.Ints(parts)
	m.barrier.set(m.id, session.GenerationID(), fmt.Sprint(parts))
	emit(map[string]interface{}{"event": "assigned", "member": m.id, "generation": session.GenerationID(),
		"partitions": parts})
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for !m.barrier.ready() {
		select {
		case <-session.Context().Done():
			return nil // a rebalance: Consume is called again
		case <-time.After(50 * time.Millisecond):
		}
	}
	for msg := range claim.Messages() {
		session.MarkMessage(msg, "") // committed by sarama's offset manager (OffsetCommit v1)
		m.mu.Lock()
		if _, dup := m.seen[string(msg.Value)]; !dup {
			m.seen[string(msg.Value)] = m.id
			*m.total++
		}
		finished := *m.total >= m.want
		m.mu.Unlock()
		if finished {
			m.done()
		}
	}
	return nil
}

// consumeInGroup runs two members of one group until count distinct values
// are consumed. Consumer groups need Version >= 0.10.2 in sarama 1.22; every
// other setting is the default (initial offset newest: the test commits the
// starting offsets first, with the default-Version offset manager).
func consumeInGroup(addrs []string, topic, group string, count int, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	shared := &barrier{claims: map[int]string{}, gens: map[int]int32{}}
	var mu sync.Mutex
	seen := map[string]int{}
	total := 0
	var wg sync.WaitGroup
	groups := make([]sarama.ConsumerGroup, 2)
	for i := 0; i < 2; i++ {
		config := sarama.NewConfig()
		config.Version = sarama.V0_10_2_0
		cg, err := sarama.NewConsumerGroup(addrs, group, config)
		if err != nil {
			fail(err)
		}
		groups[i] = cg
		handler := &member{id: i, barrier: shared, mu: &mu, seen: seen, total: &total, want: count, done: cancel}
		wg.Add(1)
		go func(cg sarama.ConsumerGroup, handler *member) {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, handler); err != nil && ctx.Err() == nil {
					emit(map[string]interface{}{"event": "consume_error", "member": handler.id, "error": err.Error()})
					time.Sleep(100 * time.Millisecond)
				}
			}
		}(cg, handler)
	}
	wg.Wait()
	for _, cg := range groups {
		if err := cg.Close(); err != nil { // the final offset commit happens here
			fail(err)
		}
	}
	byMember := map[string]int{"0": 0, "1": 0}
	for _, id := range seen {
		byMember[fmt.Sprint(id)]++
	}
	emit(map[string]interface{}{"event": "consumed", "total": total, "by_member": byMember,
		"timed_out": total < count})
}

func defaultClient(addrs []string) sarama.Client {
	client, err := sarama.NewClient(addrs, sarama.NewConfig()) // default Version: 0.8.2
	if err != nil {
		fail(err)
	}
	return client
}

// commit stores offset for every partition of topic, as a group that is not
// using Kafka's group management (generation -1), through the offset manager
// with the default Version: OffsetCommit v1 with the "now" commit timestamp.
func commit(addrs []string, topic, group string, partitions int, offset int64) {
	client := defaultClient(addrs)
	defer client.Close()
	manager, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		fail(err)
	}
	poms := make([]sarama.PartitionOffsetManager, partitions)
	for p := 0; p < partitions; p++ {
		pom, err := manager.ManagePartition(topic, int32(p))
		if err != nil {
			fail(err)
		}
		pom.MarkOffset(offset, "")
		poms[p] = pom
	}
	for _, pom := range poms {
		pom.AsyncClose()
		for perr := range pom.Errors() {
			fail(perr)
		}
	}
	if err := manager.Close(); err != nil { // flushes the commit
		fail(err)
	}
	emit(map[string]interface{}{"event": "committed", "offset": offset})
}

// committed prints the group's committed offset per partition (OffsetFetch v1).
func committed(addrs []string, topic, group string, partitions int) {
	client := defaultClient(addrs)
	defer client.Close()
	manager, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		fail(err)
	}
	defer manager.Close()
	result := map[string]int64{}
	for p := 0; p < partitions; p++ {
		pom, err := manager.ManagePartition(topic, int32(p))
		if err != nil {
			fail(err)
		}
		next, _ := pom.NextOffset()
		result[fmt.Sprint(p)] = next
		pom.AsyncClose()
	}
	emit(map[string]interface{}{"event": "committed_offsets", "offsets": result})
}

// offsets asks GetOffset for newest, oldest and a timestamp with the default
// Version (ListOffsets v0, one offset each) and with 0.10.1 (ListOffsets v1,
// offsetsForTimes by record timestamp). An error is reported, not fatal: the
// v0 answer for a time before every segment is an empty list, which sarama
// reports as ErrOffsetOutOfRange.
func offsets(addrs []string, topic string, partitions int, timestamp int64) {
	for _, version := range []sarama.KafkaVersion{sarama.V0_8_2_0, sarama.V0_10_1_0} {
		config := sarama.NewConfig()
		config.Version = version
		client, err := sarama.NewClient(addrs, config)
		if err != nil {
			fail(err)
		}
		for p := 0; p < partitions; p++ {
			for name, at := range map[string]int64{"newest": sarama.OffsetNewest, "oldest": sarama.OffsetOldest,
				"time": timestamp} {
				found, err := client.GetOffset(topic, int32(p), at)
				fields := map[string]interface{}{"event": "offset", "version": version.String(), "partition": p,
					"query": name, "offset": found}
				if err != nil {
					fields["error"] = err.Error()
				}
				emit(fields)
			}
		}
		client.Close()
	}
}
