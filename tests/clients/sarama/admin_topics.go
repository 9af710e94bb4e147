package main

import (
	"fmt"
	"sort"

	"github.com/Shopify/sarama"
)

// The ClusterAdmin calls that change topics, as Sarama 1.22.1 sends them: CreateTopics v0/v1/v2
// (by Version), CreatePartitions v0, DeleteRecords v0, AlterConfigs v0, DeleteTopics v0/v1.
// Each goes to the controller Metadata named.
func topicStages(spec *Spec, config *sarama.Config, clusterAdmin sarama.ClusterAdmin) map[string]func() {
	return map[string]func(){
		"create_topic": func() {
			detail := &sarama.TopicDetail{NumPartitions: spec.PartitionCount, ReplicationFactor: 1}
			report("create_topic", clusterAdmin.CreateTopic(spec.Topic, detail, false))
		},
		"create_partitions": func() {
			report("create_partitions", clusterAdmin.CreatePartitions(spec.Topic, spec.PartitionCount, nil, false))
		},
		"alter_config": func() {
			entries := map[string]*string{}
			for name, value := range spec.Configs {
				value := value
				entries[name] = &value
			}
			report("alter_config", clusterAdmin.AlterConfig(sarama.TopicResource, spec.Topic, entries, false))
		},
		"delete_records": func() { deleteRecords(spec, config, clusterAdmin) },
		"delete_topic":   func() { report("delete_topic", clusterAdmin.DeleteTopic(spec.Topic)) },
	}
}

// report prints "done" for stage, or its error.
func report(stage string, err error) {
	if err != nil {
		fail(stage, err)
		return
	}
	emit("done", map[string]interface{}{"stage": stage})
}

// deleteRecords deletes the records below DeleteBefore in the partitions of Topic led by the
// controller Metadata named — Sarama 1.22.1 sends DeleteRecords there and ignores partition
// errors, so only the partitions that broker leads can be deleted from — then reads each
// partition's log start offset back ("low_watermark" lines).
func deleteRecords(spec *Spec, config *sarama.Config, clusterAdmin sarama.ClusterAdmin) {
	client, err := sarama.NewClient(spec.Brokers, config)
	if err != nil {
		fail("delete_records", err)
		return
	}
	defer client.Close()
	controller, err := client.Controller()
	if err != nil {
		fail("delete_records", err)
		return
	}
	partitions, err := client.Partitions(spec.Topic)
	if err != nil {
		fail("delete_records", err)
		return
	}
	led := map[int32]int64{}
	for _, partition := range partitions {
		if leader, err := client.Leader(spec.Topic, partition); err == nil && leader.ID() == controller.ID() {
			led[partition] = spec.DeleteBefore
		}
	}
	if len(led) == 0 {
		fail("delete_records", fmt.Errorf("broker %d leads no partition of %s", controller.ID(), spec.Topic))
		return
	}
	report("delete_records", clusterAdmin.DeleteRecords(spec.Topic, led))
	ids := []int{}
	for partition := range led {
		ids = append(ids, int(partition))
	}
	sort.Ints(ids)
	for _, id := range ids {
		oldest, err := client.GetOffset(spec.Topic, int32(id), sarama.OffsetOldest)
		if err != nil {
			fail("delete_records", err)
			continue
		}
		emit("low_watermark", map[string]interface{}{"partition": id, "offset": oldest})
	}
}
