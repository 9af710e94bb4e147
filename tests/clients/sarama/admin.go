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
