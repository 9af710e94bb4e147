'use strict'
// spec.members consumers of group spec.group_id read spec.topic from the beginning until they
// hold spec.count messages, then spec.idle_ms more to catch extras. Lines: {"ready": {member:
// [partitions]}} once every member holds a share of the spec.partitions partitions (a producer
// may start then), one per message with the member that read it, and {"assigned": ...} after
// the members left (committing what they read: KafkaJS's autoCommit). spec.read_uncommitted:
// KafkaJS reads read_committed by default.

const { client, emit, fromKafkaJs, main } = require('./common')

main(async spec => {
  const kafka = client(spec)
  const count = spec.members || 1
  const members = []
  const assigned = {}
  let read = 0
  let reachedCount
  const reached = new Promise(resolve => (reachedCount = resolve))
  if (spec.count === 0) reachedCount()
  let ready = false
  const maybeReady = () => {
    const shares = Object.values(assigned)
    const all = shares.flat()
    if (!ready && shares.length === count && shares.every(s => s.length > 0) &&
        all.length === spec.partitions && new Set(all).size === spec.partitions) {
      ready = true
      emit({ ready: assigned })
    }
  }
  for (let member = 0; member < count; member++) {
    const consumer = kafka.consumer({
      groupId: spec.group_id,
      readUncommitted: Boolean(spec.read_uncommitted),
      maxWaitTimeInMs: 200,
      heartbeatInterval: 500,
    })
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      assigned[member] = (payload.memberAssignment[spec.topic] || []).slice().sort()
      maybeReady()
    })
    await consumer.connect()
    await consumer.subscribe({ topic: spec.topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        emit({ member, ...fromKafkaJs(partition, message) })
        if (++read >= spec.count) reachedCount()
      },
    })
    members.push(consumer)
  }
  await reached
  await new Promise(resolve => setTimeout(resolve, spec.idle_ms || 1000))
  for (const consumer of members) await consumer.disconnect()
  emit({ assigned })
})
