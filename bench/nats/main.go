// natsbench: the NATS JetStream side of bench/peers.py, with nats.go from Debian.
//
// It creates (or recreates) one file-backed stream with the given replicas, then either
// publishes -count messages of -size bytes asynchronously (at most -pending unacknowledged)
// and reports MB/s from the first publish to the last acknowledgement, or publishes one
// message at a time, waiting for each acknowledgement, and reports the p50/p99 latency.
// It prints one JSON object on stdout; any failed publish fails the run.
package main

import (
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
)

type result struct {
	Mode     string  `json:"mode"`
	Replicas int     `json:"replicas"`
	Messages int     `json:"messages"`
	Seconds  float64 `json:"seconds,omitempty"`
	MBs      float64 `json:"mb_s,omitempty"`
	P50ms    float64 `json:"p50_ms,omitempty"`
	P99ms    float64 `json:"p99_ms,omitempty"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "natsbench: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	url := flag.String("url", nats.DefaultURL, "server URLs, comma-separated")
	stream := flag.String("stream", "bench", "stream name (its subject is the same name)")
	replicas := flag.Int("replicas", 1, "stream replicas")
	size := flag.Int("size", 1024, "message bytes")
	count := flag.Int("count", 100000, "messages")
	mode := flag.String("mode", "throughput", "throughput or latency")
	pending := flag.Int("pending", 4096, "unacknowledged asynchronous publishes at most")
	flag.Parse()

	conn, err := nats.Connect(*url)
	if err != nil {
		fail("connect %s: %v", *url, err)
	}
	defer conn.Close()
	js, err := conn.JetStream(nats.PublishAsyncMaxPending(*pending), nats.MaxWait(30*time.Second))
	if err != nil {
		fail("jetstream: %v", err)
	}
	_ = js.DeleteStream(*stream) // a previous run's stream, if any
	config := &nats.StreamConfig{
		Name: *stream, Subjects: []string{*stream}, Replicas: *replicas, Storage: nats.FileStorage,
	}
	// Right after the servers start, or while another stream is being created, the meta leader
	// may answer "no suitable peers" for a while: retry for up to 30 s.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := js.AddStream(config)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			fail("add stream %s (replicas %d): %v", *stream, *replicas, err)
		}
	}
	defer js.DeleteStream(*stream)

	payload := make([]byte, *size)
	if _, err := rand.Read(payload); err != nil {
		fail("random payload: %v", err)
	}
	out := result{Mode: *mode, Replicas: *replicas, Messages: *count}
	switch *mode {
	case "throughput":
		futures := make([]nats.PubAckFuture, 0, *count)
		started := time.Now()
		for i := 0; i < *count; i++ {
			// Wait for acknowledgements when 4096 are outstanding instead of failing after the
			// client's default 200 ms: a replicated stream's first acks can take longer.
			future, err := js.PublishAsync(*stream, payload, nats.StallWait(30*time.Second))
			if err != nil {
				fail("publish %d: %v", i, err)
			}
			futures = append(futures, future)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(5 * time.Minute):
			fail("acknowledgements: not within 5 minutes")
		}
		elapsed := time.Since(started).Seconds()
		for i, future := range futures {
			select {
			case <-future.Ok():
			case err := <-future.Err():
				fail("publish %d: %v", i, err)
			}
		}
		out.Seconds = elapsed
		out.MBs = float64(*count) * float64(*size) / 1e6 / elapsed
	case "latency":
		samples := make([]float64, 0, *count)
		for i := 0; i < *count; i++ {
			started := time.Now()
			if _, err := js.Publish(*stream, payload); err != nil {
				fail("publish %d: %v", i, err)
			}
			samples = append(samples, float64(time.Since(started).Microseconds())/1000)
		}
		sort.Float64s(samples)
		out.P50ms = samples[len(samples)*50/100]
		out.P99ms = samples[len(samples)*99/100]
	default:
		fail("unknown -mode %q (throughput or latency)", *mode)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("write result: %v", err)
	}
}
