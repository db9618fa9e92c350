// KafkaJS 2.2.4 against a broker, one step per subcommand, for tests/integration/test_kafkajs.py.
//
//   node client.js STEP --brokers H:P [--topic T] [--group G] [--count N] ...
//
// Every result is a JSON line on stdout ({"event": ...}); anything that goes wrong throws,
// and the process exits non-zero with KafkaJS's error on stderr.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

function options (argv) {
  const out = {}
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`)
    out[argv[i].slice(2)] = argv[i + 1]
  }
  return out
}

function emit (event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n')
}

// --ca FILE: TLS, trusting that CA's certificates; --cert and --key FILEs: the client's own certificate.
function tls (opts) {
  if (!opts.ca) return undefined
  const read = name => opts[name] ? fs.readFileSync(opts[name], 'utf8') : undefined
  return { ca: [read('ca')], cert: read('cert'), key: read('key') }
}

// --mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with --username and --password: SASL.
function client (opts) {
  return new Kafka({
    clientId: opts['client-id'] || 'kafkajs-test',
    brokers: [opts.brokers],
    logLevel: logLevel.WARN,
    retry: { retries: Number(opts.retries ?? 8), initialRetryTime: 100 },
    ssl: tls(opts),
    sasl: opts.mechanism ? { mechanism: opts.mechanism.toLowerCase(), username: opts.username, password: opts.password } : undefined
  })
}

const byPartition = list => list.sort((a, b) => a.partition - b.partition)

async function committedOffsets (admin, groupId, topic) {
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] })
  return byPartition(committed.partitions.map(p => ({ partition: p.partition, offset: Number(p.offset) })))
}

async function topicOffsets (admin, topic) {
  return byPartition((await admin.fetchTopicOffsets(topic)).map(o => ({ partition: o.partition, low: o.low, high: o.high })))
}

// The values of --topic's records from its start, read by a consumer of group `groupId` until
// `count` came (and `linger` ms more, in which nothing else may come) or `deadline` s passed.
async function readFromStart (kafka, groupId, topic, count, deadline, linger = 0) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, deadline * 1000)
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        if (values.length === count) { clearTimeout(timer); setTimeout(resolve, linger) }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return values
}

// The values (a JSON list of strings on stdin) to partition 0 of --topic, acks=all; then the partition
// read from the start until as many came back or --deadline seconds passed.
async function roundtrip (opts) {
  const values = JSON.parse(fs.readFileSync(0, 'utf8'))
  const kafka = client(opts)
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic: opts.topic, acks: -1, messages: values.map(value => ({ value, partition: 0 })) })
  await producer.disconnect()
  emit('consumed', { values: await readFromStart(kafka, `${opts.topic}-reader`, opts.topic, values.length, Number(opts.deadline || 30)) })
}

// Connecting with the given credentials: the error KafkaJS gives when the broker refuses them.
async function authenticate (opts) {
  const admin = client({ ...opts, retries: 0 }).admin()
  try {
    await admin.connect()
    emit('authenticated', {})
  } catch (err) {
    emit('refused', { error: err.name, message: err.message })
  } finally {
    await admin.disconnect()
  }
}

// Topic administration as an operator's Node.js tooling does it.
async function admin (opts) {
  const admin = client(opts).admin()
  await admin.connect()
  try {
    const topic = opts.topic
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '86400000' }] }],
      waitForLeaders: true
    })
    emit('created', { created })
    emit('created_again', { created: await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] }) })
    emit('topics', { topics: (await admin.listTopics()).sort() })
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    emit('metadata', {
      partitions: byPartition(metadata.topics[0].partitions.map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr })))
    })
    const cluster = await admin.describeCluster()
    emit('cluster', { brokers: cluster.brokers.map(b => ({ nodeId: b.nodeId, host: b.host, port: b.port })), controller: cluster.controller, clusterId: cluster.clusterId })
    const describe = async () => {
      const configs = await admin.describeConfigs({ resources: [{ type: 2, name: topic, configNames: ['retention.ms', 'cleanup.policy'] }], includeSynonyms: false })
      return Object.fromEntries(configs.resources[0].configEntries.map(e => [e.configName, { value: e.configValue, isDefault: e.isDefault }]))
    }
    emit('configs', { configs: await describe() })
    await admin.alterConfigs({ validateOnly: false, resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] })
    emit('configs_altered', { configs: await describe() })
    await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] })
    const grown = await admin.fetchTopicMetadata({ topics: [topic] })
    emit('partitions', { count: grown.topics[0].partitions.length })
    const producer = client(opts).producer()
    await producer.connect()
    const base = Date.now() - 60000 // record i has CreateTime base + 1000 i
    await producer.send({ topic, messages: Array.from({ length: 10 }, (_, i) => ({ value: `v${i}`, partition: 0, timestamp: String(base + 1000 * i) })) })
    await producer.disconnect()
    emit('offsets', { offsets: await topicOffsets(admin, topic) })
    const byTime = async timestamp => byPartition(await admin.fetchTopicOffsetsByTimestamp(topic, timestamp)).map(o => Number(o.offset))
    emit('offsets_by_time', { before: await byTime(base - 1), fifth: await byTime(base + 4500), after: await byTime(base + 20000) })
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '4' }] })
    emit('offsets_after_delete_records', { offsets: await topicOffsets(admin, topic) })
    await admin.deleteTopics({ topics: [topic] })
    emit('deleted', { topics: (await admin.listTopics()).sort() })
  } finally {
    await admin.disconnect()
  }
}

// Keyed records in batches of --batch, gzip-compressed, idempotent unless --idempotent false.
async function produce (opts) {
  const producer = client(opts).producer({ idempotent: opts.idempotent !== 'false', maxInFlightRequests: opts.idempotent === 'false' ? undefined : 1 })
  await producer.connect()
  const count = Number(opts.count)
  const batch = Number(opts.batch || 100)
  const start = Date.now()
  try {
    for (let i = 0; i < count; i += batch) {
      const messages = []
      for (let j = i; j < Math.min(i + batch, count); j++) {
        messages.push({ key: `k${j}`, value: `v${j}`, headers: { n: String(j) }, timestamp: String(start + j) })
      }
      const acks = await producer.send({ topic: opts.topic, messages, compression: CompressionTypes.GZIP, acks: -1 })
      for (const a of acks) emit('produced', { partition: a.partition, baseOffset: Number(a.baseOffset), errorCode: a.errorCode })
    }
  } finally {
    await producer.disconnect()
  }
}

// --members consumers of one group in this process read --count records (autocommit) and wait
// until the group has settled with every member owning partitions; then the group's description
// and committed offsets come from the admin API.
async function group (opts) {
  const kafka = client(opts)
  const count = Number(opts.count)
  const size = Number(opts.members || 1)
  const seen = new Set()
  const members = []
  const assigned = [] // member -> the partitions of its latest join
  let resolveDone
  const done = new Promise(resolve => { resolveDone = resolve })
  const settled = () => {
    const owned = assigned.flatMap(a => a || [])
    if (seen.size >= count && assigned.length === size && assigned.every(a => a && a.length) &&
        new Set(owned).size === owned.length) resolveDone()
  }
  for (let m = 0; m < size; m++) {
    const consumer = kafka.consumer({ groupId: opts.group, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
    consumer.on(consumer.events.GROUP_JOIN, e => {
      assigned[m] = e.payload.memberAssignment[opts.topic] || []
      emit('joined', { member: m, isLeader: e.payload.isLeader, partitions: assigned[m] })
      settled()
    })
    members.push(consumer)
    await consumer.connect()
    await consumer.subscribe({ topic: opts.topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        emit('consumed', { member: m, partition, offset: Number(message.offset), key: message.key.toString(), value: message.value.toString(), n: message.headers.n.toString(), timestamp: Number(message.timestamp) })
        seen.add(`${partition}:${message.offset}`)
        settled()
      }
    })
  }
  const timer = setTimeout(() => { emit('timed_out', { seen: seen.size, assigned }); resolveDone() }, Number(opts.timeout || 60) * 1000)
  await done
  clearTimeout(timer)
  const admin = kafka.admin()
  await admin.connect()
  try {
    const described = await admin.describeGroups([opts.group])
    emit('described', { state: described.groups[0].state, protocol: described.groups[0].protocol, members: described.groups[0].members.length })
    for (const consumer of members) await consumer.disconnect() // commits what it has consumed, then leaves
    emit('committed', { offsets: await committedOffsets(admin, opts.group, opts.topic) })
    const groups = await admin.listGroups()
    emit('groups', { groups: groups.groups.map(g => g.groupId).sort() })
    await admin.resetOffsets({ groupId: opts.group, topic: opts.topic, earliest: true })
    emit('reset', { offsets: await committedOffsets(admin, opts.group, opts.topic) })
    await admin.deleteGroups([opts.group])
    emit('groups_after_delete', { groups: (await admin.listGroups()).groups.map(g => g.groupId).sort() })
  } finally {
    await admin.disconnect()
  }
}

// A transactional producer: one transaction committed, one aborted, one committed together with a
// group's offsets (sendOffsets); then a read_committed consumer reads the topic from the start.
async function transactions (opts) {
  const kafka = client(opts)
  const producer = kafka.producer({ transactionalId: opts['transactional-id'], idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const run = async (label, finish, offsets) => {
    const txn = await producer.transaction()
    await txn.send({ topic: opts.topic, messages: Array.from({ length: 5 }, (_, i) => ({ key: label, value: `${label}-${i}`, partition: i % 2 })) })
    if (offsets) await txn.sendOffsets({ consumerGroupId: opts.group, topics: [{ topic: opts.topic, partitions: [{ partition: 0, offset: String(offsets) }] }] })
    await txn[finish]()
    emit('transaction', { label, finish })
  }
  try {
    await run('first', 'commit')
    await run('second', 'abort')
    await run('third', 'commit', 7)
  } finally {
    await producer.disconnect()
  }
  // Ten records committed; a second more shows that nothing else comes.
  const values = await readFromStart(kafka, `${opts.group}-reader`, opts.topic, 10, 60, 1000)
  emit('read_committed', { values: values.sort() })
  const admin = kafka.admin()
  await admin.connect()
  try {
    emit('txn_offsets', { offsets: await committedOffsets(admin, opts.group, opts.topic) })
  } finally {
    await admin.disconnect()
  }
}

const STEPS = { admin, produce, group, transactions, roundtrip, authenticate }

async function main () {
  const [step, ...rest] = process.argv.slice(2)
  if (!STEPS[step]) throw new Error(`unknown step ${step}; one of ${Object.keys(STEPS).join(', ')}`)
  await STEPS[step](options(rest))
}

// Writes to a pipe are asynchronous in Node.js: exit once stdout has taken everything written.
main().then(() => process.stdout.write('', () => process.exit(0)), err => {
  process.stderr.write(`${err.stack || err}\n`, () => process.exit(1))
})
