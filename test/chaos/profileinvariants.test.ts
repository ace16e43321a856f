// The monitor's reschedule-profile rules on hand-made pod event sequences:
// each fires on its breach and stays quiet on the drain that goes as it should.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { InvariantChecker } from './invariants.ts';
import { COUCHBASE_ANNOTATION, STRIMZI_ANNOTATION, soakProfileRules } from './profileinvariants.ts';

const CB = 'cb-ns';
const KAFKA = 'kafka-ns';
const rules = soakProfileRules({ couchbase: CB, kafka: KAFKA });
const KAFKA_LABELS = { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-cluster-kafka' };
const EXPORTER_LABELS = { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-kafka-exporter' };

function pod(
  namespace: string,
  name: string,
  labels: Record<string, string>,
  o: { uid?: string; annotation?: string; evicted?: boolean } = {},
): V1Pod {
  const [key, value] = (o.annotation ?? '=').split('=') as [string, string];
  return {
    metadata: {
      name,
      namespace,
      uid: o.uid ?? `uid-${name}`,
      labels,
      annotations: o.annotation ? { [key]: value } : {},
    },
    status: {
      conditions: o.evicted
        ? [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI', message: '' }]
        : [],
    },
  };
}

function monitor() {
  const checker = new InvariantChecker({ profiles: rules });
  let now = 1_000_000;
  const feed = (p: V1Pod, type: 'ADDED' | 'MODIFIED' | 'DELETED' = 'MODIFIED', relist = false) =>
    checker.apply({ kind: 'Pod', object: p }, type, (now += 100), relist);
  return { checker, feed };
}

describe('chaos monitor: drains under reschedule profiles', () => {
  it('selects as documented: app=couchbase in its namespace; Kafka pods whose strimzi.io/name ends in -kafka or -zookeeper', () => {
    const [couchbase, strimzi] = rules as [(typeof rules)[0], (typeof rules)[0]];
    assert.ok(couchbase.selects({ app: 'couchbase' }));
    assert.ok(!couchbase.selects({ app: 'couchbase-exporter' }));
    assert.ok(strimzi.selects(KAFKA_LABELS));
    assert.ok(strimzi.selects({ 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-cluster-zookeeper' }));
    assert.ok(!strimzi.selects(EXPORTER_LABELS));
    assert.ok(!strimzi.selects({ 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': '-kafka' }), '.+ needs a name first');
    assert.ok(!strimzi.selects({ 'strimzi.io/kind': 'KafkaConnect', 'strimzi.io/name': 'my-cluster-kafka' }));
  });

  it('a drain as it should go: annotated, moved by its operator, the exporter evicted; nothing pending', () => {
    const { checker, feed } = monitor();
    feed(pod(CB, 'cb-1', { app: 'couchbase' }), 'ADDED');
    feed(pod(KAFKA, 'my-cluster-kafka-1', KAFKA_LABELS), 'ADDED');
    feed(pod(KAFKA, 'my-kafka-exporter-1', EXPORTER_LABELS), 'ADDED');
    feed(pod(CB, 'cb-1', { app: 'couchbase' }, { annotation: COUCHBASE_ANNOTATION }));
    feed(pod(KAFKA, 'my-cluster-kafka-1', KAFKA_LABELS, { annotation: STRIMZI_ANNOTATION }));
    assert.equal(checker.pending().length, 2, 'waiting for their operators');
    feed(pod(KAFKA, 'my-kafka-exporter-1', EXPORTER_LABELS, { evicted: true }));
    feed(pod(KAFKA, 'my-kafka-exporter-1', EXPORTER_LABELS, { evicted: true }), 'DELETED');
    feed(pod(CB, 'cb-1', { app: 'couchbase' }, { annotation: COUCHBASE_ANNOTATION }), 'DELETED');
    feed(pod(KAFKA, 'my-cluster-kafka-1', KAFKA_LABELS, { annotation: STRIMZI_ANNOTATION }), 'DELETED');
    // The replacements, under the same names, are new pods.
    feed(pod(CB, 'cb-1', { app: 'couchbase' }, { uid: 'uid-cb-1-b' }), 'ADDED');
    feed(pod(KAFKA, 'my-cluster-kafka-1', KAFKA_LABELS, { uid: 'uid-kafka-1-b' }), 'ADDED');
    checker.finish(2_000_000);
    assert.deepEqual(checker.violations, []);
    assert.deepEqual(checker.pending(), []);
    assert.equal(checker.counters['rescheduleAnnotations.couchbase'], 1);
    assert.equal(checker.counters['rescheduleAnnotations.strimzi'], 1);
    assert.equal(checker.counters['rescheduleMoves.couchbase'], 1);
    assert.equal(checker.counters['rescheduleMoves.strimzi'], 1);
    assert.equal(checker.counters['rescheduleUnselectedEvictions'], 1);
  });

  it('an eviction of a deny profile’s pod is a violation, saying whether the annotation came first', () => {
    const { checker, feed } = monitor();
    feed(pod(CB, 'cb-1', { app: 'couchbase' }), 'ADDED');
    feed(pod(CB, 'cb-1', { app: 'couchbase' }, { evicted: true }));
    feed(pod(KAFKA, 'my-cluster-kafka-1', KAFKA_LABELS, { annotation: STRIMZI_ANNOTATION }), 'ADDED');
    feed(pod(KAFKA, 'my-cluster-kafka-1', KAFKA_LABELS, { annotation: STRIMZI_ANNOTATION, evicted: true }));
    feed(pod(KAFKA, 'my-cluster-kafka-1', KAFKA_LABELS, { annotation: STRIMZI_ANNOTATION, evicted: true }), 'DELETED');
    const found = checker.violations.filter((v) => v.kind === 'reschedule-profile-pod-evicted');
    assert.equal(found.length, 2);
    assert.match(
      found[0]!.message,
      /cb-ns\/cb-1, selected by the couchbase profile \(deny\), was evicted without its annotation/,
    );
    assert.match(
      found[1]!.message,
      /my-cluster-kafka-1.*strimzi.*although its annotation strimzi\.io\/manual-rolling-update was written first/,
    );
    assert.equal(checker.counters['rescheduleMoves.strimzi'], undefined, 'an eviction is no move');
  });

  it('an annotation on a pod its profile does not select is a violation, once per pod', () => {
    const { checker, feed } = monitor();
    feed(pod(KAFKA, 'my-kafka-exporter-1', EXPORTER_LABELS, { annotation: STRIMZI_ANNOTATION }), 'ADDED');
    feed(pod(KAFKA, 'my-kafka-exporter-1', EXPORTER_LABELS, { annotation: STRIMZI_ANNOTATION }));
    feed(pod(CB, 'cb-2', { app: 'couchbase' }, { annotation: STRIMZI_ANNOTATION }), 'ADDED');
    // Outside the profiles' namespaces nothing is judged.
    feed(pod('elsewhere', 'x', EXPORTER_LABELS, { annotation: STRIMZI_ANNOTATION, evicted: true }), 'ADDED');
    const found = checker.violations.map((v) => `${v.kind}: ${v.message}`);
    assert.equal(found.length, 2, found.join('\n'));
    assert.match(
      found[0]!,
      /kafka-ns\/my-kafka-exporter-1 carries the strimzi profile's annotation .* although no profile selects it/,
    );
    assert.match(
      found[1]!,
      /cb-ns\/cb-2 carries the strimzi profile's annotation .* although the couchbase profile selects it/,
    );
  });

  it('a request never carried out is pending, and a violation at the end', () => {
    const { checker, feed } = monitor();
    feed(pod(CB, 'cb-1', { app: 'couchbase' }, { annotation: COUCHBASE_ANNOTATION }), 'ADDED');
    assert.deepEqual(
      checker.pending().map((p) => `${p.workload} ${p.config}`),
      ['pod/cb-ns/cb-1 (reschedule request)'],
    );
    checker.finish(2_000_000);
    assert.deepEqual(
      checker.violations.map((v) => v.kind),
      ['reschedule-request-not-carried-out'],
    );
  });

  it('a deletion seen only on a relist is counted, not judged', () => {
    const { checker, feed } = monitor();
    feed(pod(CB, 'cb-1', { app: 'couchbase' }), 'ADDED');
    feed(pod(CB, 'cb-1', { app: 'couchbase' }), 'DELETED', true);
    checker.finish(2_000_000);
    assert.deepEqual(checker.violations, []);
    assert.equal(checker.counters['rescheduleDeletionsSeenOnlyOnRelist'], 1);
  });
});
