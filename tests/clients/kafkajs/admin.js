'use strict'
// KafkaJS's admin client: spec.action is "create_topic" (spec.partitions, spec.replication_factor),
// "offsets" (ListOffsets: earliest, latest, and by spec.timestamp_ms), "group_offsets"
// (OffsetFetch of spec.group_id for spec.topic), "reset_offsets" (resetOffsets of spec.group_id
// on spec.topic to the earliest offsets, then setOffsets to spec.set, {partition: offset}; with
// every request and every error answer the broker gave meanwhile) or "delete_groups"
// (DeleteGroups of spec.group_ids). One line of answer.

const { Kafka, logLevel } = require('kafkajs')
const { client, emit, main } = require('./common')

// A client whose connections report every request and every answer carrying an error: KafkaJS
// logs them at debug level as "Request Name(key: k, version: v)" / "Response Name(...)".
function tracedClient(spec, trace) {
  return new Kafka({
    clientId: 'pykraft-tests',
    brokers: spec.brokers,
    logLevel: logLevel.DEBUG,
    logCreator: () => ({ log }) => {
      const match = /^(Request|Response) (\w+)\(/.exec(log.message || '')
      if (!match || !trace.on) return
      if (match[1] === 'Request') trace.requests.push(match[2])
      else if (log.error) trace.errors.push(`${match[2]}: ${log.error}`)
    },
    retry: { retries: 5 },
  })
}

async function resetOffsets(spec) {
  const trace = { on: false, requests: [], errors: [] }
  const admin = tracedClient(spec, trace).admin()
  await admin.connect()
  try {
    const groupId = spec.group_id
    // Finds the coordinator first (__consumer_offsets may still be being created).
    await admin.fetchOffsets({ groupId, topics: [spec.topic] })
    const committed = async () => {
      const [{ partitions }] = await admin.fetchOffsets({ groupId, topics: [spec.topic] })
      return Object.fromEntries(partitions.map(p => [p.partition, Number(p.offset)]))
    }
    trace.on = true
    let started = Date.now()
    await admin.resetOffsets({ groupId, topic: spec.topic, earliest: true })
    const resetMs = Date.now() - started
    const requests = trace.requests.splice(0)
    const afterReset = await committed()
    const partitions = Object.entries(spec.set).map(([partition, offset]) => ({
      partition: Number(partition), offset: String(offset),
    }))
    started = Date.now()
    await admin.setOffsets({ groupId, topic: spec.topic, partitions })
    const setMs = Date.now() - started
    emit({
      reset: { requests, ms: resetMs, committed: afterReset },
      set: { requests: trace.requests.splice(0), ms: setMs, committed: await committed() },
      errors: trace.errors,
    })
  } finally {
    await admin.disconnect()
  }
}

main(async spec => {
  if (spec.action === 'reset_offsets') return resetOffsets(spec)
  const admin = client(spec).admin()
  await admin.connect()
  try {
    if (spec.action === 'create_topic') {
      const created = await admin.createTopics({
        topics: [{
          topic: spec.topic,
          numPartitions: spec.partitions,
          replicationFactor: spec.replication_factor,
        }],
        waitForLeaders: true,
      })
      emit({ created })
    } else if (spec.action === 'offsets') {
      const latest = await admin.fetchTopicOffsets(spec.topic)
      const byTimestamp = await admin.fetchTopicOffsetsByTimestamp(spec.topic, spec.timestamp_ms)
      emit({
        earliest: Object.fromEntries(latest.map(p => [p.partition, Number(p.low)])),
        latest: Object.fromEntries(latest.map(p => [p.partition, Number(p.high)])),
        by_timestamp: Object.fromEntries(byTimestamp.map(p => [p.partition, Number(p.offset)])),
      })
    } else if (spec.action === 'group_offsets') {
      const groupId = spec.group_id
      const [{ partitions }] = await admin.fetchOffsets({ groupId, topics: [spec.topic] })
      emit({ committed: Object.fromEntries(partitions.map(p => [p.partition, Number(p.offset)])) })
    } else if (spec.action === 'delete_groups') {
      const deleted = await admin.deleteGroups(spec.group_ids)
      emit({ deleted: deleted.map(({ groupId, errorCode }) => [groupId, errorCode]) })
    } else {
      throw new Error(`unknown action ${spec.action}`)
    }
  } finally {
    await admin.disconnect()
  }
})
