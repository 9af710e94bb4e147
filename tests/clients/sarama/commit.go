package main

import (
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// commit is Sarama's own offset management with its default Version (V0_8_2_0): an
// OffsetManager (NewOffsetManagerFromClient, as sarama-cluster and Burrow-era tools use it)
// finds the coordinator with FindCoordinator v0 (ConsumerMetadataRequest), reads where each
// partition resumes with OffsetFetch v1 ("start" lines) and commits with OffsetCommit v1 —
// Sarama 1.22.1 hard-codes both versions whatever Config.Version says; with RetentionMs it
// commits with v2 and that retention time instead. Records are read with
// a consumer at FetchVersion (Fetch v0-3 carry the pre-v2 message formats pykraft does not
// serve), Count records in all; each is marked, the manager's Close flushes the last commit,
// and a fresh OffsetFetch v1 reports what the group now holds ("committed" lines).
func commit(spec *Spec) error {
	config, err := newConfig(spec, spec.Version)
	if err != nil {
		return err
	}
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.Retention = time.Duration(spec.RetentionMs) * time.Millisecond
	config.Consumer.Return.Errors = true
	client, err := sarama.NewClient(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer client.Close()
	partitions, err := client.Partitions(spec.Topic)
	if err != nil {
		return err
	}
	manager, err := sarama.NewOffsetManagerFromClient(spec.Group, client)
	if err != nil {
		return err
	}
	managed := map[int32]sarama.PartitionOffsetManager{}
	var errorsDone sync.WaitGroup
	starts := map[int32]int64{}
	for _, partition := range partitions {
		pom, err := manager.ManagePartition(spec.Topic, partition)
		if err != nil {
			return err
		}
		managed[partition] = pom
		errorsDone.Add(1)
		go func(pom sarama.PartitionOffsetManager) {
			defer errorsDone.Done()
			for err := range pom.Errors() {
				fail("commit", err)
			}
		}(pom)
		next, _ := pom.NextOffset()
		starts[partition] = next
		emit("start", map[string]interface{}{"partition": partition, "offset": next})
	}
	if err := readAndMark(spec, starts, managed); err != nil {
		return err
	}
	if err := manager.Close(); err != nil {
		return err
	}
	waitOrGiveUp(&errorsDone, 5*time.Second)
	return emitCommitted(spec, spec.Version, partitions)
}

// readAndMark reads Count records from the partitions in starts and marks each as consumed.
func readAndMark(spec *Spec, starts map[int32]int64, managed map[int32]sarama.PartitionOffsetManager) error {
	config, err := newConfig(spec, spec.FetchVersion)
	if err != nil {
		return err
	}
	config.Consumer.Return.Errors = true
	consumer, err := sarama.NewConsumer(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer consumer.Close()
	records := newStream()
	for partition, start := range starts {
		pc, err := consumer.ConsumePartition(spec.Topic, partition, start)
		if err != nil {
			return err
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
		managed[message.Partition].MarkOffset(message.Offset+1, "")
	}
	return nil
}

// emitCommitted asks the group's coordinator (OffsetFetch v1, as Sarama's offset manager does)
// what the group has committed for partitions, from a new client at version.
func emitCommitted(spec *Spec, version string, partitions []int32) error {
	config, err := newConfig(spec, version)
	if err != nil {
		return err
	}
	client, err := sarama.NewClient(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer client.Close()
	coordinator, err := client.Coordinator(spec.Group)
	if err != nil {
		return err
	}
	request := &sarama.OffsetFetchRequest{Version: 1, ConsumerGroup: spec.Group}
	for _, partition := range partitions {
		request.AddPartition(spec.Topic, partition)
	}
	response, err := coordinator.FetchOffset(request)
	if err != nil {
		return err
	}
	for _, partition := range partitions {
		block := response.GetBlock(spec.Topic, partition)
		if block == nil {
			emit("error", map[string]interface{}{"stage": "offset_fetch", "error": "no block", "partition": partition})
			continue
		}
		emit("committed", map[string]interface{}{
			"partition": partition, "offset": block.Offset, "code": int16(block.Err),
		})
	}
	return nil
}

func waitOrGiveUp(group *sync.WaitGroup, limit time.Duration) {
	done := make(chan struct{})
	go func() {
		group.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
	}
}
