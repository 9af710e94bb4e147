package main

import (
	"context"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// group joins Group as a Sarama ConsumerGroup (Version must be at least 0.10.2, Sarama's own
// check), reads Count records of Topic from where the group left off (the oldest offset for a
// new group), marks each, and leaves; the session's offset manager commits with OffsetCommit v1
// as Sarama 1.22.1 always does. Then "committed" lines as in commit.
func group(spec *Spec) error {
	config, err := newConfig(spec, spec.Version)
	if err != nil {
		return err
	}
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.Retention = time.Duration(spec.RetentionMs) * time.Millisecond
	config.Consumer.Return.Errors = true
	consumerGroup, err := sarama.NewConsumerGroup(spec.Brokers, spec.Group, config)
	if err != nil {
		return err
	}
	go func() {
		for err := range consumerGroup.Errors() {
			fail("group", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handler := &countingHandler{limit: spec.Count, done: cancel}
	for ctx.Err() == nil {
		if err := consumerGroup.Consume(ctx, []string{spec.Topic}, handler); err != nil {
			fail("consume", err)
			break
		}
	}
	if err := consumerGroup.Close(); err != nil {
		fail("close", err)
	}
	client, err := sarama.NewClient(spec.Brokers, config)
	if err != nil {
		return err
	}
	partitions, err := client.Partitions(spec.Topic)
	client.Close()
	if err != nil {
		return err
	}
	return emitCommitted(spec, spec.Version, partitions)
}

// countingHandler marks records until limit have been read, then ends the session.
type countingHandler struct {
	lock  sync.Mutex
	read  int
	limit int
	done  context.CancelFunc
}

func (h *countingHandler) Setup(session sarama.ConsumerGroupSession) error {
	emit("assigned", map[string]interface{}{
		"member_id": session.MemberID(), "generation": session.GenerationID(), "claims": session.Claims(),
	})
	return nil
}

func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *countingHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		if !h.take(session, message) {
			return nil
		}
	}
	return nil
}

// take reads message if the limit is not reached yet; false once it is.
func (h *countingHandler) take(session sarama.ConsumerGroupSession, message *sarama.ConsumerMessage) bool {
	h.lock.Lock()
	defer h.lock.Unlock()
	if h.read >= h.limit {
		return false
	}
	h.read++
	emitRecord(message)
	session.MarkMessage(message, "")
	if h.read == h.limit {
		h.done()
	}
	return true
}
