package main

import (
	"errors"
	"time"

	"github.com/Shopify/sarama"
)

// errIdle: no record and no error arrived within the wait given to stream.next.
var errIdle = errors.New("no record arrived in time")

// stream merges the records and errors of several partition consumers, so a reader stops at
// the first fetch error instead of waiting for records that will never come.
type stream struct {
	records chan *sarama.ConsumerMessage
	errs    chan error
}

func newStream() *stream {
	return &stream{records: make(chan *sarama.ConsumerMessage), errs: make(chan error)}
}

func (s *stream) add(pc sarama.PartitionConsumer) {
	go func() {
		for err := range pc.Errors() {
			s.errs <- err
		}
	}()
	go func() {
		for message := range pc.Messages() {
			s.records <- message
		}
	}()
}

// next is the next record, the first error of any partition, or errIdle after wait (0: never).
func (s *stream) next(wait time.Duration) (*sarama.ConsumerMessage, error) {
	var idle <-chan time.Time
	if wait > 0 {
		idle = time.After(wait)
	}
	select {
	case message := <-s.records:
		return message, nil
	case err := <-s.errs:
		return nil, err
	case <-idle:
		return nil, errIdle
	}
}
