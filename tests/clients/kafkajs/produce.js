'use strict'
// Produce spec.messages to spec.topic in one send(); one line per message: its index,
// partition and offset. spec.partition: send every message there (no metadata asked first);
// spec.producer: KafkaJS producer options (e.g. idempotent); spec.compression: "gzip" (the
// codec KafkaJS carries itself) or absent.

const { CompressionTypes } = require('kafkajs')
const { client, emit, main, placed, toKafkaJs, withPartitions } = require('./common')

main(async spec => {
  const kafka = client(spec)
  const messages =
    spec.partition === undefined
      ? await withPartitions(kafka, spec.topic, spec.messages.map(toKafkaJs))
      : spec.messages.map(message => ({ ...toKafkaJs(message), partition: spec.partition }))
  const producer = kafka.producer({ allowAutoTopicCreation: false, ...spec.producer })
  await producer.connect()
  try {
    const answers = await producer.send({
      topic: spec.topic,
      messages,
      acks: spec.acks === undefined ? -1 : spec.acks,
      compression: spec.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
    })
    placed(messages, answers).forEach(emit)
  } finally {
    await producer.disconnect()
  }
})
