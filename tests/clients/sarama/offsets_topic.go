package main

import (
	"encoding/binary"
	"fmt"
)

// The __consumer_offsets records a lag monitor decodes by hand, with the rules Burrow
// (linkedin/Burrow, core/internal/consumer/kafka_client.go, processConsumerOffsetsMessage)
// applies — what it accepts is what a broker must write for Burrow to see a group:
//
//   - an empty value is a tombstone and is skipped;
//   - key version 0 or 1: an offset commit, key = group, topic (strings), partition (int32);
//     value version 0 or 1: offset (int64), metadata (string), commit timestamp (int64), the
//     rest (v1's expire timestamp) ignored; value version 3: offset (int64), leader epoch
//     (int32), metadata, commit timestamp. Any other value version (2, 4, ...) is refused;
//   - key version 2: group metadata, key = group (string); value versions 0-3 only:
//     protocol type, generation (int32), protocol, leader (strings), and from v2 the current
//     state timestamp (int64); then the members (int32 count): member id, from v3 the group
//     instance id, client id, client host, from v1 the rebalance timeout (int32), session
//     timeout (int32), subscription (bytes), assignment (bytes). Only protocol type
//     "consumer" is read past the header; an assignment is ConsumerProtocol's: version
//     (int16, >= 0), topics (int32 count) of name and partitions (int32 count of int32),
//     user data (bytes).
//   - any other key version is refused.
//
// Strings are int16-length (-1 null) and bytes int32-length, as in Kafka's GroupMetadataManager
// schemas (OffsetCommitKey/Value, GroupMetadataKey/Value in Kafka's group-coordinator JSON).

type reader struct {
	data   []byte
	failed string // the first field that could not be read; "" while all went well
}

func (r *reader) take(n int, field string) []byte {
	if r.failed != "" {
		return nil
	}
	if n < 0 || n > len(r.data) {
		r.failed = field
		return nil
	}
	taken := r.data[:n]
	r.data = r.data[n:]
	return taken
}

func (r *reader) int16(field string) int16 {
	if b := r.take(2, field); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) int32(field string) int32 {
	if b := r.take(4, field); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64(field string) int64 {
	if b := r.take(8, field); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) string(field string) string {
	length := r.int16(field)
	if length == -1 {
		return ""
	}
	return string(r.take(int(length), field))
}

func (r *reader) bytes(field string) []byte {
	length := r.int32(field)
	if length == -1 {
		return nil
	}
	return r.take(int(length), field)
}

// decoded is one __consumer_offsets record as Burrow reads it: Kind is "offset_commit",
// "group_metadata", "tombstone" or "decode_error" (Reason names the field or version refused).
type decoded struct {
	Kind         string
	KeyVersion   int16
	ValueVersion int16
	Group        string
	Topic        string
	Partition    int32
	Offset       int64
	ProtocolType string
	Generation   int32
	Protocol     string
	Leader       string
	Members      []member
	Reason       string
}

type member struct {
	MemberID   string             `json:"member_id"`
	InstanceID string             `json:"group_instance_id"`
	ClientID   string             `json:"client_id"`
	ClientHost string             `json:"client_host"`
	Assignment map[string][]int32 `json:"assignment"`
}

func decodeOffsetsTopicRecord(key, value []byte) decoded {
	keys := &reader{data: key}
	result := decoded{KeyVersion: keys.int16("key_version")}
	if keys.failed != "" {
		return refuse(result, keys.failed)
	}
	if len(value) == 0 {
		result.Kind = "tombstone"
		return result
	}
	values := &reader{data: value}
	result.ValueVersion = values.int16("value_version")
	if values.failed != "" {
		return refuse(result, values.failed)
	}
	switch result.KeyVersion {
	case 0, 1:
		return decodeOffsetCommit(result, keys, values)
	case 2:
		return decodeGroupMetadata(result, keys, values)
	}
	return refuse(result, fmt.Sprintf("key version %d", result.KeyVersion))
}

func refuse(result decoded, reason string) decoded {
	result.Kind = "decode_error"
	result.Reason = reason
	return result
}

func decodeOffsetCommit(result decoded, keys, values *reader) decoded {
	result.Group = keys.string("group")
	result.Topic = keys.string("topic")
	result.Partition = keys.int32("partition")
	if keys.failed != "" {
		return refuse(result, keys.failed)
	}
	switch result.ValueVersion {
	case 0, 1:
		result.Offset = values.int64("offset")
	case 3:
		result.Offset = values.int64("offset")
		values.int32("leader_epoch")
	default:
		return refuse(result, fmt.Sprintf("offset value version %d", result.ValueVersion))
	}
	values.string("metadata")
	values.int64("commit_timestamp")
	if values.failed != "" {
		return refuse(result, values.failed)
	}
	result.Kind = "offset_commit"
	return result
}

func decodeGroupMetadata(result decoded, keys, values *reader) decoded {
	result.Group = keys.string("group")
	if keys.failed != "" {
		return refuse(result, keys.failed)
	}
	version := result.ValueVersion
	if version < 0 || version > 3 {
		return refuse(result, fmt.Sprintf("group metadata value version %d", version))
	}
	result.ProtocolType = values.string("protocol_type")
	result.Generation = values.int32("generation")
	result.Protocol = values.string("protocol")
	result.Leader = values.string("leader")
	if version >= 2 {
		values.int64("current_state_timestamp")
	}
	if values.failed != "" {
		return refuse(result, values.failed)
	}
	result.Kind = "group_metadata"
	if result.ProtocolType != "consumer" {
		return result
	}
	count := values.int32("member_count")
	for i := int32(0); i < count && values.failed == ""; i++ {
		result.Members = append(result.Members, decodeMember(values, version))
	}
	if values.failed != "" {
		return refuse(result, values.failed)
	}
	return result
}

func decodeMember(values *reader, version int16) member {
	decodedMember := member{MemberID: values.string("member_id")}
	if version >= 3 {
		decodedMember.InstanceID = values.string("group_instance_id")
	}
	decodedMember.ClientID = values.string("client_id")
	decodedMember.ClientHost = values.string("client_host")
	if version >= 1 {
		values.int32("rebalance_timeout")
	}
	values.int32("session_timeout")
	values.bytes("subscription")
	assignment := values.bytes("assignment")
	if values.failed == "" && len(assignment) > 0 {
		decodedMember.Assignment = decodeAssignment(values, assignment)
	}
	return decodedMember
}

// decodeAssignment reads ConsumerProtocol's assignment; a failure is recorded on values.
func decodeAssignment(values *reader, data []byte) map[string][]int32 {
	assignment := &reader{data: data}
	if assignment.int16("consumer_protocol_version") < 0 {
		assignment.failed = "consumer_protocol_version"
	}
	topics := map[string][]int32{}
	count := assignment.int32("assignment_topic_count")
	for i := int32(0); i < count && assignment.failed == ""; i++ {
		topic := assignment.string("topic_name")
		partitions := []int32{}
		partitionCount := assignment.int32("assignment_partition_count")
		for j := int32(0); j < partitionCount && assignment.failed == ""; j++ {
			partitions = append(partitions, assignment.int32("assignment_partition_id"))
		}
		topics[topic] = partitions
	}
	assignment.bytes("user_data")
	if assignment.failed != "" {
		values.failed = "assignment"
	}
	return topics
}
