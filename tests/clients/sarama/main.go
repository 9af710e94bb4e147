// Command sarama-client drives Sarama 1.22.1 (Debian's golang-github-shopify-sarama-dev)
// against a pykraft cluster for tests/clients/test_sarama.py and test_sarama_admin.py.
//
// Usage: sarama-client COMMAND SPEC_JSON
//
// Every command prints one JSON object per line on stdout: what it did ("produced", "record",
// "committed", "topic", ...) and every error it met ("error" with the stage, Sarama's message
// and, for a Kafka error, its code). It exits 0 when every stage succeeded, 2 when a stage
// failed (the error lines say which), 1 on bad usage. A command never hangs: the spec's
// timeout_ms bounds it (exit 3 with an "error" line for stage "timeout").
//
// SPEC_JSON's "version" is Sarama's Config.Version as a Kafka release ("2.0.0"); empty or
// absent keeps Sarama's default (V0_8_2_0), the setting the tests care most about.
// SARAMA_CLIENT_LOG=1 in the environment sends Sarama's own log to stderr.
// Built by .ci/install-sarama.sh in GOPATH mode against /usr/share/gocode (no modules).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// Spec is the one JSON argument every command takes; each command reads the fields it needs.
type Spec struct {
	Brokers        []string          `json:"brokers"`
	Version        string            `json:"version"`       // Config.Version; "" = Sarama's default
	FetchVersion   string            `json:"fetch_version"` // the fetching client's Version (commit)
	TimeoutMs      int               `json:"timeout_ms"`
	Topic          string            `json:"topic"`
	Group          string            `json:"group"`
	Count          int               `json:"count"`           // records to produce, or to read in this run
	KeyPrefix      string            `json:"key_prefix"`      // produce: keys are KeyPrefix + index
	ClientID       string            `json:"client_id"`       // Config.ClientID; "" = Sarama's default
	Partitions     []int32           `json:"partitions"`      // offsets: which partitions to ask about
	Stage          string            `json:"stage"`           // admin: run this stage alone; "" = all
	Compression    string            `json:"compression"`     // produce: none, gzip, snappy, lz4, zstd
	RetentionMs    int               `json:"retention_ms"`    // commit, group: Consumer.Offsets.Retention
	PartitionCount int32             `json:"partition_count"` // admin create_topic, create_partitions
	DeleteBefore   int64             `json:"delete_before"`   // admin delete_records: the new log start offset
	Configs        map[string]string `json:"configs"`         // admin alter_config: the topic's configs
	Records        []struct {
		Key   []byte `json:"key"`   // base64 in JSON
		Value []byte `json:"value"` // base64 in JSON; empty: a tombstone
	} `json:"records"` // decode: __consumer_offsets records
}

var output = struct {
	sync.Mutex
	failed bool
}{}

// emit prints one event as a JSON line; events from several goroutines never interleave.
func emit(event string, fields map[string]interface{}) {
	line := map[string]interface{}{"event": event}
	for key, value := range fields {
		line[key] = value
	}
	encoded, err := json.Marshal(line)
	if err != nil {
		panic(err)
	}
	output.Lock()
	defer output.Unlock()
	if event == "error" {
		output.failed = true
	}
	fmt.Println(string(encoded))
}

// fail reports err for stage: the message, and the Kafka error code when err carries one.
func fail(stage string, err error) {
	fields := map[string]interface{}{"stage": stage, "error": err.Error()}
	if code, ok := kafkaCode(err); ok {
		fields["code"] = code
	}
	emit("error", fields)
}

func kafkaCode(err error) (int16, bool) {
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		return int16(kerr), true
	}
	var producerErr *sarama.ProducerError
	if errors.As(err, &producerErr) {
		return kafkaCode(producerErr.Err)
	}
	var producerErrs sarama.ProducerErrors
	if errors.As(err, &producerErrs) && len(producerErrs) > 0 {
		return kafkaCode(producerErrs[0].Err)
	}
	var topicErr *sarama.TopicError
	if errors.As(err, &topicErr) {
		return int16(topicErr.Err), true
	}
	var partitionErr *sarama.TopicPartitionError
	if errors.As(err, &partitionErr) {
		return int16(partitionErr.Err), true
	}
	var consumerErr *sarama.ConsumerError
	if errors.As(err, &consumerErr) {
		return kafkaCode(consumerErr.Err)
	}
	return 0, false
}

// newConfig is Sarama's default configuration with Version and ClientID from the spec.
func newConfig(spec *Spec, version string) (*sarama.Config, error) {
	config := sarama.NewConfig()
	if spec.ClientID != "" {
		config.ClientID = spec.ClientID
	}
	if version != "" {
		parsed, err := sarama.ParseKafkaVersion(version)
		if err != nil {
			return nil, err
		}
		config.Version = parsed
	}
	return config, nil
}

var commands = map[string]func(*Spec) error{
	"produce": produce,
	"consume": consume,
	"commit":  commit,
	"group":   group,
	"admin":   admin,
	"offsets": offsets,
	"burrow":  burrow,
	"decode":  decode,
}

func main() {
	if len(os.Args) != 3 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: sarama-client produce|consume|commit|group|admin|offsets|burrow|decode SPEC_JSON")
		os.Exit(1)
	}
	var spec Spec
	if err := json.Unmarshal([]byte(os.Args[2]), &spec); err != nil || (len(spec.Brokers) == 0 && os.Args[1] != "decode") {
		fmt.Fprintln(os.Stderr, "sarama-client: SPEC_JSON must be a JSON object with brokers:", err)
		os.Exit(1)
	}
	if os.Getenv("SARAMA_CLIENT_LOG") != "" { // Sarama's own log on stderr, for debugging
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	if spec.TimeoutMs <= 0 {
		spec.TimeoutMs = 60000
	}
	go func() {
		time.Sleep(time.Duration(spec.TimeoutMs) * time.Millisecond)
		fail("timeout", fmt.Errorf("%s did not finish in %d ms", os.Args[1], spec.TimeoutMs))
		os.Exit(3)
	}()
	if err := commands[os.Args[1]](&spec); err != nil {
		fail(os.Args[1], err)
	}
	output.Lock()
	defer output.Unlock()
	if output.failed {
		os.Exit(2)
	}
}
