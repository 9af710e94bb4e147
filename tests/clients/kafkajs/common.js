'use strict'
// What the KafkaJS scripts share. Each script takes one JSON spec as its argument, writes one
// JSON object per line on stdout (the Python test reads them), logs to stderr, and exits 1 with
// an {"error": ...} line when KafkaJS throws. Bytes travel as base64 (null stays null).

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1' // the scripts choose partitions themselves
const { Kafka, logLevel, Partitioners } = require('kafkajs')

const LEVELS = ['NOTHING', 'ERROR', 'WARN', 'INFO', 'DEBUG']

const toBytes = text => (text === null ? null : Buffer.from(text, 'base64'))
const fromBytes = buffer => (buffer == null ? null : buffer.toString('base64'))

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n')
}

function stderrLogger() {
  return ({ namespace, level, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${LEVELS[level]} ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
  }
}

function client(spec) {
  return new Kafka({
    clientId: 'pykraft-tests',
    brokers: spec.brokers,
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    retry: { retries: spec.retries === undefined ? 5 : spec.retries },
  })
}

// A test message (key, value, [[name, value], ...] headers, timestamp) as KafkaJS sends it:
// a header repeated keeps its values in order as an array (KafkaJS 2's multi-value headers).
function toKafkaJs(message) {
  const headers = {}
  for (const [name, value] of message.headers) {
    const bytes = toBytes(value)
    if (!(name in headers)) headers[name] = bytes
    else if (Array.isArray(headers[name])) headers[name].push(bytes)
    else headers[name] = [headers[name], bytes]
  }
  return {
    key: toBytes(message.key),
    value: toBytes(message.value),
    headers,
    timestamp: String(message.timestamp_ms),
  }
}

// A consumed KafkaJS message back in the test's terms.
function fromKafkaJs(partition, message) {
  const headers = []
  for (const [name, value] of Object.entries(message.headers || {})) {
    for (const one of Array.isArray(value) ? value : [value]) headers.push([name, fromBytes(one)])
  }
  return {
    partition,
    offset: Number(message.offset),
    key: fromBytes(message.key),
    value: fromBytes(message.value),
    headers,
    timestamp_ms: Number(message.timestamp),
  }
}

// Each message's partition, chosen by KafkaJS's default partitioner (murmur2 of the key, as
// the Java client), so one send() of several partitions still tells every message's offset.
async function withPartitions(kafka, topic, messages) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const [{ partitions }] = (await admin.fetchTopicMetadata({ topics: [topic] })).topics
    const partitioner = Partitioners.DefaultPartitioner()
    return messages.map(message => ({
      ...message,
      partition: partitioner({ topic, partitionMetadata: partitions, message }),
    }))
  } finally {
    await admin.disconnect()
  }
}

// send() answers one base offset per partition; messages keep their order within a partition.
function placed(messages, answers) {
  const next = {}
  for (const { partition, baseOffset, errorCode } of answers) {
    if (errorCode !== 0) throw new Error(`partition ${partition}: error ${errorCode}`)
    next[partition] = Number(baseOffset)
  }
  return messages.map((message, index) => {
    return { index, partition: message.partition, offset: next[message.partition]++ }
  })
}

function main(body) {
  const spec = JSON.parse(process.argv[2])
  const deadline = setTimeout(() => {
    emit({ error: 'ScriptTimeout', message: `no result in ${spec.timeout_ms} ms` })
    process.exit(1)
  }, spec.timeout_ms || 60000)
  body(spec).then(
    () => {
      clearTimeout(deadline)
      process.exit(0)
    },
    error => {
      // KafkaJS wraps the broker's error once retries run out; its type is Kafka's error name.
      const cause = error.cause || error
      emit({ error: error.name, message: error.message, type: cause.type || null })
      process.exit(1)
    },
  )
}

module.exports = {
  client, emit, fromBytes, fromKafkaJs, main, placed, toBytes, toKafkaJs, withPartitions,
}
