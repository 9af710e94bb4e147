package main

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/Shopify/sarama"
)

// admin runs Sarama's ClusterAdmin (Version at least 0.11.0: Sarama refuses DescribeConfigs
// below it): DescribeCluster and ListTopics (Metadata v0, then one DescribeConfigs v0 for every
// topic), DescribeConfig of Topic and of the broker the admin talks to (always v0 in 1.22.1),
// DescribeTopics. Each stage that fails prints an "error" line; the others still run, though a
// connection the broker closed fails the next request on it too ("broken pipe"): spec.Stage
// runs one stage alone.
func admin(spec *Spec) error {
	config, err := newConfig(spec, spec.Version)
	if err != nil {
		return err
	}
	clusterAdmin, err := sarama.NewClusterAdmin(spec.Brokers, config)
	if err != nil {
		return err
	}
	defer clusterAdmin.Close()
	stages := map[string]func(){
		"describe_cluster": func() { describeCluster(clusterAdmin) },
		"list_topics":      func() { listTopics(clusterAdmin, spec.Topic) },
		"topic_config": func() {
			describeConfig(clusterAdmin, "topic_config", sarama.ConfigResource{Type: sarama.TopicResource, Name: spec.Topic})
		},
		"broker_config": func() { describeBrokerConfig(spec, config, clusterAdmin, kafkaBrokerResource) },
		"broker_config_1_22": func() {
			describeBrokerConfig(spec, config, clusterAdmin, sarama.BrokerResource)
		},
		"describe_topics": func() { describeTopics(clusterAdmin, spec.Topic) },
		"list_groups":     func() { listGroups(clusterAdmin) },
		"describe_groups": func() { describeGroups(clusterAdmin, spec.Group) },
		"group_offsets":   func() { groupOffsets(clusterAdmin, spec.Group, spec.Topic) },
	}
	for name, stage := range topicStages(spec, config, clusterAdmin) {
		stages[name] = stage
	}
	if spec.Stage != "" {
		stage, ok := stages[spec.Stage]
		if !ok {
			return fmt.Errorf("unknown admin stage %q", spec.Stage)
		}
		stage()
		return nil
	}
	for _, name := range []string{"describe_cluster", "list_topics", "topic_config", "broker_config", "describe_topics"} {
		stages[name]()
	}
	return nil
}

// controllerOf is the broker id Sarama's ClusterAdmin sends DescribeConfigs to (1.22.1's
// DescribeCluster asks Metadata v0, which names no controller).
func controllerOf(spec *Spec, config *sarama.Config) (int32, error) {
	client, err := sarama.NewClient(spec.Brokers, config)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	controller, err := client.Controller()
	if err != nil {
		return 0, err
	}
	return controller.ID(), nil
}

// kafkaBrokerResource is Kafka's ConfigResource.Type BROKER (4). Sarama 1.22.1's BrokerResource
// is 5, from an early draft of KIP-133, which Kafka knows as no type at all (Sarama 1.23 fixed
// it): a 1.22.1 program that describes a broker passes 4 itself.
const kafkaBrokerResource = sarama.ConfigResourceType(4)

// describeBrokerConfig describes the configs of the broker DescribeConfig is sent to (the
// controller Metadata names), as resource type resourceType.
func describeBrokerConfig(spec *Spec, config *sarama.Config, clusterAdmin sarama.ClusterAdmin, resourceType sarama.ConfigResourceType) {
	controllerID, err := controllerOf(spec, config)
	if err != nil {
		fail("controller", err)
		return
	}
	name := strconv.Itoa(int(controllerID))
	describeConfig(clusterAdmin, "broker_config", sarama.ConfigResource{Type: resourceType, Name: name})
}

func describeTopics(clusterAdmin sarama.ClusterAdmin, topic string) {
	topics, err := clusterAdmin.DescribeTopics([]string{topic})
	if err != nil {
		fail("describe_topics", err)
		return
	}
	for _, described := range topics {
		emit("described_topic", map[string]interface{}{
			"name": described.Name, "code": int16(described.Err), "partitions": len(described.Partitions),
		})
	}
}

func describeCluster(clusterAdmin sarama.ClusterAdmin) {
	brokers, controllerID, err := clusterAdmin.DescribeCluster()
	if err != nil {
		fail("describe_cluster", err)
		return
	}
	ids := []int32{}
	for _, broker := range brokers {
		ids = append(ids, broker.ID())
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	emit("cluster", map[string]interface{}{"brokers": ids, "controller_id": controllerID})
}

// listTopics prints every topic's name, and the details ListTopics assembled for topic.
func listTopics(clusterAdmin sarama.ClusterAdmin, topic string) {
	topics, err := clusterAdmin.ListTopics()
	if err != nil {
		fail("list_topics", err)
		return
	}
	names := []string{}
	for name := range topics {
		names = append(names, name)
	}
	sort.Strings(names)
	emit("topics", map[string]interface{}{"names": names})
	if detail, ok := topics[topic]; ok {
		configs := map[string]string{}
		for name, value := range detail.ConfigEntries {
			if value != nil {
				configs[name] = *value
			}
		}
		emit("topic", map[string]interface{}{
			"name": topic, "partitions": detail.NumPartitions,
			"replication_factor": detail.ReplicationFactor, "configs": configs,
		})
	}
}

func describeConfig(clusterAdmin sarama.ClusterAdmin, event string, resource sarama.ConfigResource) {
	entries, err := clusterAdmin.DescribeConfig(resource)
	if err != nil {
		fail(event, err)
		return
	}
	emit(event+"s", map[string]interface{}{"resource": resource.Name, "count": len(entries)})
	for _, entry := range entries {
		emit(event, map[string]interface{}{
			"resource": resource.Name, "name": entry.Name, "value": entry.Value,
			"read_only": entry.ReadOnly, "default": entry.Default, "sensitive": entry.Sensitive,
		})
	}
}

// listGroups: ListConsumerGroups asks every broker (ListGroups v0) for the groups it coordinates.
func listGroups(clusterAdmin sarama.ClusterAdmin) {
	groups, err := clusterAdmin.ListConsumerGroups()
	if err != nil {
		fail("list_groups", err)
		return
	}
	emit("groups", map[string]interface{}{"groups": groups})
}

// describeGroups: DescribeConsumerGroups (DescribeGroups v0 to the coordinator).
func describeGroups(clusterAdmin sarama.ClusterAdmin, group string) {
	described, err := clusterAdmin.DescribeConsumerGroups([]string{group})
	if err != nil {
		fail("describe_groups", err)
		return
	}
	for _, description := range described {
		members := []map[string]string{}
		for memberID, member := range description.Members {
			members = append(members, map[string]string{
				"member_id": memberID, "client_id": member.ClientId, "client_host": member.ClientHost,
			})
		}
		emit("group", map[string]interface{}{
			"group_id": description.GroupId, "code": int16(description.Err), "state": description.State,
			"protocol_type": description.ProtocolType, "protocol": description.Protocol, "members": members,
		})
	}
}

// groupOffsets: ListConsumerGroupOffsets (OffsetFetch v1 to the coordinator from Version
// 0.8.2.2 on, v0 below) for every partition of topic.
func groupOffsets(clusterAdmin sarama.ClusterAdmin, group, topic string) {
	topics, err := clusterAdmin.DescribeTopics([]string{topic})
	if err != nil || len(topics) != 1 {
		fail("group_offsets", fmt.Errorf("describe %s: %v", topic, err))
		return
	}
	partitions := []int32{}
	for _, partition := range topics[0].Partitions {
		partitions = append(partitions, partition.ID)
	}
	response, err := clusterAdmin.ListConsumerGroupOffsets(group, map[string][]int32{topic: partitions})
	if err != nil {
		fail("group_offsets", err)
		return
	}
	for _, partition := range partitions {
		block := response.GetBlock(topic, partition)
		if block == nil {
			fail("group_offsets", fmt.Errorf("no answer for %s-%d", topic, partition))
			continue
		}
		emit("group_offset", map[string]interface{}{
			"partition": partition, "offset": block.Offset, "code": int16(block.Err),
		})
	}
}
