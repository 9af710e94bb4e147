'use strict'
// KafkaJS's admin client: spec.action is "create_topic" (spec.partitions, spec.replication_factor),
// "offsets" (ListOffsets: earliest, latest, and by spec.timestamp_ms) or "group_offsets"
// (OffsetFetch of spec.group_id for spec.topic). One line of answer.

const { client, emit, main } = require('./common')

main(async spec => {
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
    } else {
      throw new Error(`unknown action ${spec.action}`)
    }
  } finally {
    await admin.disconnect()
  }
})
