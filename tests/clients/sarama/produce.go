package main

import (
	"fmt"

	"github.com/Shopify/sarama"
)

var codecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

// produce sends Count records with keys KeyPrefix+i and values "value-i" through a
// SyncProducer with Sarama's default producer settings (acks WaitForLocal, the hash
// partitioner, 3 retries), compressed with Compression if given. It stops at the first failed
// send.
func produce(spec *Spec) error {
	config, err := newConfig(spec, spec.Version)
	if err != nil {
		return err
	}
	config.Producer.Return.Successes = true // a SyncProducer needs it
	if spec.Compression != "" {
		codec, ok := codecs[spec.Compression]
		if !ok {
			return fmt.Errorf("unknown compression %q", spec.Compression)
		}
		config.Producer.Compression = codec
	}
	producer, err := sarama.NewSyncProducer(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer producer.Close()
	for i := 0; i < spec.Count; i++ {
		key := fmt.Sprintf("%s%d", spec.KeyPrefix, i)
		value := fmt.Sprintf("value-%d", i)
		partition, offset, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: spec.Topic,
			Key:   sarama.StringEncoder(key),
			Value: sarama.StringEncoder(value),
		})
		if err != nil {
			fail("produce", err)
			return nil
		}
		emit("produced", map[string]interface{}{
			"partition": partition, "offset": offset, "key": key, "value": value,
		})
	}
	return nil
}

// consume reads every partition of Topic from its oldest offset with a plain (group-less)
// PartitionConsumer until Count records have arrived; each is a "record" line. The first error
// (finding the oldest offset, or a fetch) ends it.
func consume(spec *Spec) error {
	config, err := newConfig(spec, spec.Version)
	if err != nil {
		return err
	}
	config.Consumer.Return.Errors = true
	consumer, err := sarama.NewConsumer(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer consumer.Close()
	partitions, err := consumer.Partitions(spec.Topic)
	if err != nil {
		return err
	}
	records := newStream()
	for _, partition := range partitions {
		pc, err := consumer.ConsumePartition(spec.Topic, partition, sarama.OffsetOldest)
		if err != nil {
			fail("consume_partition", err)
			return nil
		}
		defer pc.AsyncClose()
		records.add(pc)
	}
	for read := 0; read < spec.Count; read++ {
		message, err := records.next(0)
		if err != nil {
			fail("fetch", err)
			return nil
		}
		emitRecord(message)
	}
	return nil
}

func emitRecord(message *sarama.ConsumerMessage) {
	emit("record", map[string]interface{}{
		"partition": message.Partition, "offset": message.Offset,
		"key": string(message.Key), "value": string(message.Value),
	})
}
