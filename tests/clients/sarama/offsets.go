package main

import (
	"github.com/Shopify/sarama"
)

// offsets asks for the oldest and newest offset of Topic's partitions with Client.GetOffset:
// ListOffsets v0 (Sarama's OffsetRequest, one offset wanted) below Version 0.10.1, v1 from it —
// the request Burrow's lag checks send.
func offsets(spec *Spec) error {
	config, err := newConfig(spec, spec.Version)
	if err != nil {
		return err
	}
	client, err := sarama.NewClient(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer client.Close()
	partitions := spec.Partitions
	if len(partitions) == 0 {
		if partitions, err = client.Partitions(spec.Topic); err != nil {
			return err
		}
	}
	for _, partition := range partitions {
		oldest, err := client.GetOffset(spec.Topic, partition, sarama.OffsetOldest)
		if err != nil {
			fail("list_offsets", err)
			continue
		}
		newest, err := client.GetOffset(spec.Topic, partition, sarama.OffsetNewest)
		if err != nil {
			fail("list_offsets", err)
			continue
		}
		emit("offset", map[string]interface{}{"partition": partition, "oldest": oldest, "newest": newest})
	}
	return nil
}
