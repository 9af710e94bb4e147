'use strict'
// One transactional producer (spec.transactional_id) runs spec.transactions in turn: each sends
// its messages to spec.topic, maybe sendOffsets (its "offsets": {group_id, topic, partitions:
// [{partition, offset}]}), then commits or aborts (its "commit": true or false). One line per
// message ({transaction, index, partition, offset}), one per ended transaction ({ended}).

const { client, emit, main, placed, toKafkaJs, withPartitions } = require('./common')

main(async spec => {
  const kafka = client(spec)
  const producer = kafka.producer({
    transactionalId: spec.transactional_id,
    maxInFlightRequests: 1,
    idempotent: true,
    allowAutoTopicCreation: false,
  })
  await producer.connect()
  try {
    for (const [number, step] of spec.transactions.entries()) {
      const messages = await withPartitions(kafka, spec.topic, step.messages.map(toKafkaJs))
      const transaction = await producer.transaction()
      const answers = await transaction.send({ topic: spec.topic, messages, acks: -1 })
      placed(messages, answers).forEach(one => emit({ transaction: number, ...one }))
      if (step.offsets) {
        const { group_id: consumerGroupId, topic, partitions } = step.offsets
        const offsets = partitions.map(p => ({ partition: p.partition, offset: String(p.offset) }))
        await transaction.sendOffsets({ consumerGroupId, topics: [{ topic, partitions: offsets }] })
      }
      if (step.commit) await transaction.commit()
      else await transaction.abort()
      emit({ transaction: number, ended: step.commit ? 'commit' : 'abort' })
    }
  } finally {
    await producer.disconnect()
  }
})
