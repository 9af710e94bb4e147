package main

import (
	"time"

	"github.com/Shopify/sarama"
)

const offsetsTopic = "__consumer_offsets"

// idleLimit ends the read of __consumer_offsets when no record arrived for this long — a
// partition whose last records are control records never delivers its last offset.
const idleLimit = 3 * time.Second

// burrow reads __consumer_offsets from the oldest offset up to each partition's end (found with
// ListOffsets at Version) as Burrow's KafkaClient module does, decodes every record with its
// rules (offsets_topic.go) and prints the ones of Group, and every record it refuses.
func burrow(spec *Spec) error {
	config, err := newConfig(spec, spec.Version)
	if err != nil {
		return err
	}
	config.Consumer.Return.Errors = true
	// A connection serves one request at a time (Kafka's order), so each ListOffsets that
	// ConsumePartition sends waits behind the long-poll Fetch already there: Sarama's default
	// 250 ms wait, times two per partition, would make reading 50 partitions take seconds.
	config.Consumer.MaxWaitTime = 10 * time.Millisecond
	client, err := sarama.NewClient(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer consumer.Close()
	partitions, err := client.Partitions(offsetsTopic)
	if err != nil {
		return err
	}
	starts, ends := map[int32]int64{}, map[int32]int64{}
	for _, partition := range partitions {
		oldest, newest, err := offsetRange(client, partition)
		if err != nil {
			return err
		}
		if newest > oldest {
			starts[partition], ends[partition] = oldest, newest
		}
	}
	records := newStream()
	for partition, oldest := range starts {
		pc, err := consumer.ConsumePartition(offsetsTopic, partition, oldest)
		if err != nil {
			return err
		}
		defer pc.AsyncClose()
		records.add(pc)
	}
	readUntilEnds(spec.Group, records, ends)
	return nil
}

func offsetRange(client sarama.Client, partition int32) (int64, int64, error) {
	oldest, err := client.GetOffset(offsetsTopic, partition, sarama.OffsetOldest)
	if err != nil {
		return 0, 0, err
	}
	newest, err := client.GetOffset(offsetsTopic, partition, sarama.OffsetNewest)
	return oldest, newest, err
}

func readUntilEnds(group string, records *stream, ends map[int32]int64) {
	for len(ends) > 0 {
		message, err := records.next(idleLimit)
		if err == errIdle {
			return
		}
		if err != nil {
			fail("fetch", err)
			return
		}
		if message.Offset+1 >= ends[message.Partition] {
			delete(ends, message.Partition)
		}
		emitDecoded(group, message)
	}
}

func emitDecoded(group string, message *sarama.ConsumerMessage) {
	record := decodeOffsetsTopicRecord(message.Key, message.Value)
	if record.Kind != "decode_error" && record.Group != group {
		return
	}
	fields := record.fields()
	fields["offsets_partition"] = message.Partition
	fields["offsets_offset"] = message.Offset
	emit(record.Kind, fields)
}

// decode decodes Records (key and value bytes, base64 in the JSON spec) with Burrow's rules
// and prints one line each, in order — no broker involved.
func decode(spec *Spec) error {
	for _, record := range spec.Records {
		decoded := decodeOffsetsTopicRecord(record.Key, record.Value)
		emit(decoded.Kind, decoded.fields())
	}
	return nil
}

func (record decoded) fields() map[string]interface{} {
	return map[string]interface{}{
		"key_version": record.KeyVersion, "value_version": record.ValueVersion,
		"group": record.Group, "topic": record.Topic, "partition": record.Partition,
		"offset": record.Offset, "protocol_type": record.ProtocolType,
		"generation": record.Generation, "protocol": record.Protocol, "leader": record.Leader,
		"members": record.Members, "reason": record.Reason,
	}
}
