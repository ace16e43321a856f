import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { assertReaching, SKIP } from '../../support/reach.ts';
import type { AdmissionRequestV1 } from '../../../src/runtime/admission/admission.ts';
import type { Node, Pod } from '../../../src/runtime/kube/types.ts';
import {
  parseRescheduleConfig,
  type RescheduleConfig,
  type RescheduleConfigInput,
} from '../../../src/drain/reschedule/rescheduleconfig.ts';
import {
  DRY_RUN_SUFFIX,
  DRY_RUN_WARNING,
  MESSAGES,
  RELEASE_AGREEMENT_MS,
  apiErrorIsTransient,
  decideReschedule,
  decodeRecord,
  decodeRecords,
  effectFailed,
  encodeRecord,
  isDryRun,
  newTrackingConfigMap,
  nodeIsDraining,
  readEviction,
  recordExpired,
  type EvictionFacts,
  type NodeLookup,
  type PodLookup,
  type RecordsLookup,
  type RescheduleDecision,
  type RescheduleEffect,
  type RescheduleInput,
  type TrackingRecord,
  type UpdateRecordsEffect,
} from '../../../src/drain/reschedule/decide.ts';

const NOW = Date.UTC(2025, 0, 2, 3, 4, 5);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const NS = 'db';
const NAME = 'cb-0000';
const ANNOTATION = 'cao.couchbase.com/reschedule';

function config(input: RescheduleConfigInput = {}): RescheduleConfig {
  const parsed = parseRescheduleConfig(input);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.errors.join('; '));
  return parsed.config;
}
const CONFIG = config(); // app=couchbase, cao.couchbase.com/reschedule=true, TTL 1h

interface PodOptions {
  name?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  node?: string;
}

function pod(o: PodOptions = {}): Pod {
  return {
    metadata: {
      name: o.name ?? NAME,
      namespace: NS,
      uid: o.uid ?? 'uid-new',
      labels: o.labels ?? { app: 'couchbase' },
      annotations: o.annotations ?? {},
    },
    spec: { containers: [], ...(o.node === '' ? {} : { nodeName: o.node ?? 'node-a' }) },
  };
}

function node(name: string, o: { cordoned?: boolean; taints?: string[] } = {}): Node {
  return {
    metadata: { name },
    spec: {
      unschedulable: o.cordoned ?? false,
      taints: (o.taints ?? []).map((key) => ({ key, effect: 'NoSchedule' })),
    },
  };
}

function facts(o: Partial<EvictionFacts> = {}): EvictionFacts {
  return { namespace: NS, name: NAME, requestDryRun: false, deleteOptionsDryRun: [], ...o };
}

function rec(o: Partial<TrackingRecord> = {}): TrackingRecord {
  const refreshedAt = o.refreshedAt ?? NOW - MINUTE;
  return { uid: 'uid-old', pod: NAME, node: 'node-a', requestedAt: refreshedAt - MINUTE, refreshedAt, ...o };
}

function stored(...records: TrackingRecord[]): RecordsLookup {
  return { kind: 'found', data: Object.fromEntries(records.map((r) => [encodeRecord(r).key, encodeRecord(r).value])) };
}

const found = (p: Pod): PodLookup => ({ kind: 'found', pod: p });
const nodeFound = (n: Node): NodeLookup => ({ kind: 'found', node: n });

function decide(o: Partial<RescheduleInput> = {}): RescheduleDecision {
  return decideReschedule({ eviction: facts(), pod: found(pod()), records: stored(), config: CONFIG, now: NOW, ...o });
}

const failure = (code: 404 | 429 | 500, message: string) => ({
  status: 'Failure',
  code,
  reason: code === 404 ? 'NotFound' : code === 429 ? 'TooManyRequests' : 'InternalError',
  message,
});

function recordsEffect(d: RescheduleDecision): UpdateRecordsEffect {
  const e = d.effects.find((x): x is UpdateRecordsEffect => x.kind === 'update-records');
  assert.ok(e, 'an update-records effect');
  return e;
}

function setRecords(e: UpdateRecordsEffect): TrackingRecord[] {
  return Object.entries(e.patch.data).flatMap(([k, v]) => {
    if (v === null) return [];
    const d = decodeRecord(k, v);
    assert.ok(d.ok);
    return d.ok ? [d.record] : [];
  });
}

const removedKeys = (e: UpdateRecordsEffect) =>
  Object.entries(e.patch.data)
    .filter(([, v]) => v === null)
    .map(([k]) => k)
    .sort();

// A tiny cluster the effects are applied to, for end-to-end scenarios.
class World {
  pods = new Map<string, Pod>();
  nodes = new Map<string, Node>();
  trackingData: Record<string, string> | undefined;
  now = NOW;
  config = CONFIG;

  evict(name: string, o: Partial<EvictionFacts> = {}): RescheduleDecision {
    const p = this.pods.get(name);
    const nodeName = p?.spec?.nodeName;
    const n = nodeName !== undefined ? this.nodes.get(nodeName) : undefined;
    const d = decideReschedule({
      eviction: facts({ name, ...o }),
      pod: p ? found(structuredClone(p)) : { kind: 'not-found' },
      ...(nodeName !== undefined ? { podNode: n ? nodeFound(n) : { kind: 'not-found' } } : {}),
      records: { kind: 'found', data: this.trackingData && { ...this.trackingData } },
      config: this.config,
      now: this.now,
    });
    for (const e of d.effects) this.apply(e);
    return d;
  }

  apply(e: RescheduleEffect): void {
    if (e.kind === 'annotate-pod') {
      const p = this.pods.get(e.name);
      assert.ok(p && p.metadata?.uid === e.patch.metadata.uid, 'uid precondition holds');
      p.metadata.annotations = { ...p.metadata.annotations, ...e.patch.metadata.annotations };
      return;
    }
    if (this.trackingData === undefined) {
      this.trackingData = newTrackingConfigMap(e).data ?? {};
      return;
    }
    for (const [k, v] of Object.entries(e.patch.data)) {
      if (v === null) delete this.trackingData[k];
      else this.trackingData[k] = v;
    }
  }

  /** What the operator does with an annotated pod: delete it and create it again, same name, new UID. */
  recreate(name: string, uid: string, onNode: string): void {
    const old = this.pods.get(name);
    assert.ok(old);
    this.pods.set(name, pod({ name, uid, node: onNode, labels: old.metadata?.labels ?? {} }));
  }
}

describe("decideReschedule: the reference hook's unit cases", { timeout: 10000 }, () => {
  it('a missing pod: 404 "Pod no longer exists", nothing to do', () => {
    const d = decide({ pod: { kind: 'not-found' } });
    assert.deepEqual(d.answer, { allowed: false, status: failure(404, 'Pod no longer exists') });
    assert.deepEqual(d.effects, []);
    assert.equal(d.outcome, 'pod-gone');
  });

  it('a pod without the label: allowed at once, without looking at records', () => {
    const d = decide({
      pod: found(pod({ labels: { app: 'nginx' } })),
      records: { kind: 'failed', error: 'boom', transient: true },
    });
    assert.deepEqual(d.answer, { allowed: true });
    assert.deepEqual(d.effects, []);
  });

  it('an annotated pod: 429 "Pod waiting to be rescheduled"', () => {
    const d = decide({
      pod: found(pod({ uid: 'uid-a', annotations: { [ANNOTATION]: 'true' } })),
      records: stored(rec({ uid: 'uid-a' })),
    });
    assert.deepEqual(d.answer, { allowed: false, status: failure(429, 'Pod waiting to be rescheduled') });
    assert.deepEqual(d.effects, []);
  });

  it('an unannotated pod with no record: record it, annotate it, 429 "Reschedule annotation added to pod"', () => {
    const d = decide({ eviction: facts({ requestedBy: 'kubectl-user' }) });
    assert.equal(d.outcome, 'reschedule-requested');
    assert.equal(d.answer.allowed, false);
    assert.deepEqual(d.answer.status, failure(429, 'Reschedule annotation added to pod'));
    assert.deepEqual(
      d.effects.map((e) => e.kind),
      ['update-records', 'annotate-pod'],
    );
    assert.deepEqual(setRecords(recordsEffect(d)), [
      { uid: 'uid-new', pod: NAME, node: 'node-a', requestedAt: NOW, refreshedAt: NOW, requestedBy: 'kubectl-user' },
    ]);
    const annotate = d.effects[1];
    assert.ok(annotate?.kind === 'annotate-pod');
    assert.deepEqual(annotate.patch, { metadata: { uid: 'uid-new', annotations: { [ANNOTATION]: 'true' } } });
    assert.equal(annotate.namespace, NS);
    assert.equal(recordsEffect(d).configMap, 'stateward-reschedule-tracking');
  });

  it('tracked, not annotated, recreated elsewhere: 404 "Pod has been rescheduled with the same name", record consumed', () => {
    const d = decide({
      pod: found(pod({ uid: 'uid-new', node: 'node-b' })),
      podNode: nodeFound(node('node-b')),
      records: stored(rec({ uid: 'uid-old', node: 'node-a' })),
    });
    assert.equal(d.outcome, 'replaced');
    assert.deepEqual(d.answer.status, failure(404, 'Pod has been rescheduled with the same name'));
    assert.deepEqual(
      d.effects.map((e) => e.kind),
      ['update-records'],
    );
    const kept = recordsEffect(d).patch.data['uid-old'];
    assert.equal(typeof kept, 'string');
    assert.deepEqual(
      (({ releasedTo, releasedAt }) => ({ releasedTo, releasedAt }))(JSON.parse(kept!) as Record<string, unknown>),
      { releasedTo: 'uid-new', releasedAt: new Date(NOW).toISOString() },
      'consumed: kept only to answer the same eviction alike, released to the replacement',
    );
  });

  it('another pod tracked: this one is asked to move too, the other record untouched', () => {
    const other = rec({ uid: 'uid-other', pod: 'cb-0001' });
    const d = decide({ records: stored(other) });
    assert.equal(d.outcome, 'reschedule-requested');
    assert.deepEqual(Object.keys(recordsEffect(d).patch.data), ['uid-new']);
  });

  it('tracking off: annotate only, 429', () => {
    const d = decide({
      config: config({ track: false }),
      records: { kind: 'failed', error: 'never read', transient: true },
    });
    assert.deepEqual(d.answer.status, failure(429, 'Reschedule annotation added to pod'));
    assert.deepEqual(
      d.effects.map((e) => e.kind),
      ['annotate-pod'],
    );
  });

  it("tracking off: an old pod's record is never used", () => {
    const d = decide({
      config: config({ track: false }),
      pod: found(pod({ node: 'node-b' })),
      podNode: nodeFound(node('node-b')),
      records: stored(rec()),
    });
    assert.equal(d.outcome, 'reschedule-requested');
  });
});

describe('decideReschedule: scope and identity', { timeout: 10000 }, () => {
  it('a namespace out of scope is allowed before anything is read', () => {
    const d = decide({
      config: config({ namespaces: 'other' }),
      pod: { kind: 'failed', error: 'not read', transient: true },
    });
    assert.deepEqual(d.answer, { allowed: true });
    assert.equal(d.outcome, 'not-in-scope');
  });

  it('a label selector picks pods', () => {
    const c = config({ selectors: ['app in (couchbase,kafka),tier!=test'] });
    assert.equal(decide({ config: c, pod: found(pod({ labels: { app: 'kafka' } })) }).outcome, 'reschedule-requested');
    assert.equal(
      decide({ config: c, pod: found(pod({ labels: { app: 'kafka', tier: 'test' } })) }).outcome,
      'not-selected',
    );
  });

  it('a precondition UID of an earlier pod is allowed: the API server answers 409', () => {
    const d = decide({ eviction: facts({ preconditionUid: 'uid-old' }) });
    assert.equal(d.outcome, 'uid-mismatch');
    assert.equal(d.answer.allowed, true);
    assert.deepEqual(d.effects, []);
    assert.match(d.answer.warnings?.[0] ?? '', /precondition uid uid-old is not pod db\/cb-0000's uid uid-new/);
  });

  it('a matching precondition UID is judged as usual', () => {
    assert.equal(decide({ eviction: facts({ preconditionUid: 'uid-new' }) }).outcome, 'reschedule-requested');
  });

  it('an annotation with another value is overwritten, as the reference does', () => {
    const d = decide({ pod: found(pod({ annotations: { [ANNOTATION]: 'false' } })) });
    assert.equal(d.outcome, 'reschedule-requested');
  });

  it('a custom annotation is what is written and compared', () => {
    const c = config({ annotation: 'example.com/move=now' });
    assert.equal(
      decide({ config: c, pod: found(pod({ annotations: { 'example.com/move': 'now' } })) }).outcome,
      'waiting',
    );
    const d = decide({ config: c });
    const annotate = d.effects.find((e) => e.kind === 'annotate-pod');
    assert.deepEqual(annotate?.kind === 'annotate-pod' && annotate.patch.metadata.annotations, {
      'example.com/move': 'now',
    });
  });

  it('a found pod without a UID cannot be tracked: 429, retried', () => {
    const p = pod();
    delete p.metadata?.uid;
    const d = decide({ pod: found(p) });
    assert.deepEqual(d.answer.status, failure(429, 'Failed to get pod'));
    assert.deepEqual(d.effects, []);
  });
});

describe('decideReschedule: API errors', { timeout: 10000 }, () => {
  it('a transient pod GET failure is 429 (kubectl retries), never 500', () => {
    const d = decide({ pod: { kind: 'failed', error: 'etcdserver: request timed out', transient: true } });
    assert.deepEqual(d.answer.status, failure(429, 'Failed to get pod'));
    assert.match(d.answer.warnings?.[0] ?? '', /request timed out; the eviction can be retried/);
  });

  it("a permanent failure (RBAC) keeps the reference's 500, to stop the drain loudly", () => {
    const d = decide({ pod: { kind: 'failed', error: 'pods "cb-0000" is forbidden', transient: false } });
    assert.deepEqual(d.answer.status, failure(500, 'Failed to get pod'));
  });

  it('unreadable records: 429 "Failed to get rescheduled pods tracking resource"', () => {
    const d = decide({ records: { kind: 'failed', error: 'connection reset', transient: true } });
    assert.equal(d.outcome, 'records-lookup-failed');
    assert.deepEqual(d.answer.status, failure(429, 'Failed to get rescheduled pods tracking resource'));
    assert.deepEqual(d.effects, []);
  });

  it('unreadable records do not matter for a pod already waiting', () => {
    const d = decide({
      pod: found(pod({ annotations: { [ANNOTATION]: 'true' } })),
      records: { kind: 'failed', error: 'x', transient: true },
    });
    assert.deepEqual(d.answer.status, failure(429, 'Pod waiting to be rescheduled'));
    assert.equal(d.logWarnings.length, 1);
  });

  it("effect failures answer with the reference's messages, 429 when transient", () => {
    const d = decide();
    const [records, annotate] = d.effects;
    assert.ok(records && annotate);
    assert.deepEqual(
      effectFailed(records, { error: 'timeout', transient: true }).status,
      failure(429, 'Failed to add annotation to rescheduled pods tracking resource'),
    );
    assert.deepEqual(
      effectFailed(annotate, { error: 'conflict', transient: true }).status,
      failure(429, 'Failed to add reschedule annotation to pod'),
    );
    assert.deepEqual(
      effectFailed(annotate, { error: 'forbidden', transient: false }).status,
      failure(500, 'Failed to add reschedule annotation to pod'),
    );
    const replaced = decide({
      pod: found(pod({ node: 'node-b' })),
      podNode: nodeFound(node('node-b')),
      records: stored(rec()),
    });
    assert.deepEqual(
      effectFailed(recordsEffect(replaced), { error: 'x', transient: true }).status,
      failure(429, MESSAGES.failedRemoveRecord),
    );
  });

  it('apiErrorIsTransient: only errors a retry cannot fix are permanent', () => {
    for (const code of [undefined, 401, 404, 409, 429, 500, 502, 503, 504])
      assert.equal(apiErrorIsTransient(code), true, String(code));
    for (const code of [400, 403, 405, 415, 422]) assert.equal(apiErrorIsTransient(code), false, String(code));
  });
});

describe('decideReschedule: same-name replacement, tracked by UID', { timeout: 10000 }, () => {
  const replacement = (o: Partial<RescheduleInput> = {}) =>
    decide({
      pod: found(pod({ uid: 'uid-new', node: 'node-b' })),
      podNode: nodeFound(node('node-b')),
      records: stored(rec()),
      ...o,
    });

  it('an expired record releases nothing: the replacement is asked to move', () => {
    const d = replacement({ records: stored(rec({ refreshedAt: NOW - HOUR })) });
    assert.equal(d.outcome, 'reschedule-requested');
    assert.deepEqual(removedKeys(recordsEffect(d)), ['uid-old']);
  });

  it('a record stamped far in the future releases nothing', () => {
    assert.equal(
      replacement({ records: stored(rec({ requestedAt: NOW + 2 * HOUR, refreshedAt: NOW + 2 * HOUR })) }).outcome,
      'reschedule-requested',
    );
  });

  it('a replacement back on the recorded node is not released', () => {
    const d = decide({
      pod: found(pod({ uid: 'uid-new', node: 'node-a' })),
      podNode: nodeFound(node('node-a', { cordoned: true })),
      records: stored(rec()),
    });
    assert.equal(d.outcome, 'reschedule-requested');
  });

  it('a replacement on a cordoned or drain-tainted node is not released', () => {
    assert.equal(
      replacement({ podNode: nodeFound(node('node-b', { cordoned: true })) }).outcome,
      'reschedule-requested',
    );
    assert.equal(
      replacement({ podNode: nodeFound(node('node-b', { taints: ['karpenter.sh/disrupted'] })) }).outcome,
      'reschedule-requested',
    );
    assert.equal(
      replacement({ podNode: nodeFound(node('node-b', { taints: ['example.com/other'] })) }).outcome,
      'replaced',
    );
  });

  it('an unknown node state never releases: 429, retried', () => {
    const missing = replacement({ podNode: undefined });
    assert.equal(missing.outcome, 'node-lookup-failed');
    assert.deepEqual(missing.answer.status, failure(429, "Failed to get the pod's node"));
    assert.deepEqual(missing.effects, []);
    assert.equal(
      replacement({ podNode: { kind: 'failed', error: 'x', transient: true } }).outcome,
      'node-lookup-failed',
    );
    assert.equal(replacement({ podNode: nodeFound(node('node-c')) }).outcome, 'node-lookup-failed');
  });

  it('a replacement not yet scheduled, or on a deleted node, is released', () => {
    assert.equal(
      replacement({ pod: found(pod({ uid: 'uid-new', node: '' })), podNode: undefined }).outcome,
      'replaced',
    );
    assert.equal(replacement({ podNode: { kind: 'not-found' } }).outcome, 'replaced');
  });

  it('a record with no node cannot release', () => {
    assert.equal(replacement({ records: stored(rec({ node: '' })) }).outcome, 'reschedule-requested');
  });

  it('a record of another pod name releases nothing', () => {
    assert.equal(replacement({ records: stored(rec({ pod: 'cb-0001' })) }).outcome, 'reschedule-requested');
  });

  it('every earlier pod of the name goes with the release: released to the replacement, or removed', () => {
    const d = replacement({
      records: stored(rec(), rec({ uid: 'uid-older', node: 'node-b', refreshedAt: NOW - 30 * MINUTE })),
    });
    assert.equal(d.outcome, 'replaced');
    // uid-older lived on the replacement's own node: it never released it, and is removed.
    assert.deepEqual(removedKeys(recordsEffect(d)), ['uid-older']);
    assert.deepEqual(
      setRecords(recordsEffect(d)).map((r) => [r.uid, r.releasedTo]),
      [['uid-old', 'uid-new']],
    );
    assert.match(
      d.answer.warnings?.[0] ?? '',
      /uid uid-old on node node-a\) was replaced by uid uid-new on node node-b/,
    );
  });
});

describe('decideReschedule: record refresh and garbage', { timeout: 10000 }, () => {
  const waitingPod = found(pod({ uid: 'uid-a', annotations: { [ANNOTATION]: 'true' } }));

  it("a waiting pod's record is refreshed from half its TTL on, keeping requestedAt", () => {
    assert.deepEqual(
      decide({ pod: waitingPod, records: stored(rec({ uid: 'uid-a', refreshedAt: NOW - 29 * MINUTE })) }).effects,
      [],
    );
    const d = decide({
      pod: waitingPod,
      records: stored(
        rec({ uid: 'uid-a', requestedAt: NOW - 50 * MINUTE, refreshedAt: NOW - 30 * MINUTE, requestedBy: 'first' }),
      ),
    });
    assert.deepEqual(d.answer.status, failure(429, MESSAGES.podWaiting));
    assert.deepEqual(setRecords(recordsEffect(d)), [
      {
        uid: 'uid-a',
        pod: NAME,
        node: 'node-a',
        requestedAt: NOW - 50 * MINUTE,
        refreshedAt: NOW,
        requestedBy: 'first',
      },
    ]);
  });

  it('a pod annotated by someone else gets a record, so its replacement is known', () => {
    const d = decide({ pod: waitingPod });
    assert.equal(d.outcome, 'waiting');
    assert.deepEqual(
      setRecords(recordsEffect(d)).map((r) => r.uid),
      ['uid-a'],
    );
  });

  it('malformed records are ignored with a warning and removed on the next write; newer formats are kept', () => {
    const d = decide({
      pod: found(pod({ node: 'node-b' })),
      podNode: nodeFound(node('node-b')),
      records: {
        kind: 'found',
        data: {
          'uid-old':
            '{"v":1,"pod":"cb-0000","uid":"uid-old","node":"node-a","requestedAt":"yesterday","refreshedAt":"now"}',
          junk: 'true',
          'uid-next': JSON.stringify({ v: 2, anything: true }),
          'uid-gone': encodeRecord(rec({ uid: 'uid-gone', pod: 'cb-0009', refreshedAt: NOW - 2 * HOUR })).value,
        },
      },
    });
    assert.equal(d.outcome, 'reschedule-requested', 'a malformed record of this pod releases nothing');
    assert.deepEqual(removedKeys(recordsEffect(d)), ['junk', 'uid-gone', 'uid-old']);
    assert.equal(d.logWarnings.length, 3);
    assert.ok(d.logWarnings.some((w) => /"uid-next": format version 2 is newer/.test(w)));
    assert.ok(d.logWarnings.some((w) => /"junk" is malformed \(not a JSON object\)/.test(w)));
  });
});

describe('decideReschedule: dry run', { timeout: 10000 }, () => {
  const kubectlDryRun = facts({ deleteOptionsDryRun: ['All'] });

  it('both dry-run signals count; any non-empty list does, as in the API server', () => {
    assert.equal(isDryRun(facts({ requestDryRun: true })), true);
    assert.equal(isDryRun(kubectlDryRun), true);
    assert.equal(isDryRun(facts({ deleteOptionsDryRun: ['Unknown'] })), true);
    assert.equal(isDryRun(facts()), false);
  });

  it('a pod a real eviction would ask to move is allowed with warnings, and nothing is done', () => {
    const d = decide({ eviction: kubectlDryRun });
    assert.equal(d.dryRun, true);
    assert.equal(d.outcome, 'reschedule-requested');
    assert.deepEqual(d.effects, []);
    assert.equal(d.answer.allowed, true);
    assert.equal(d.answer.warnings?.[0], DRY_RUN_WARNING);
    assert.match(
      d.answer.warnings?.[1] ?? '',
      /would be refused \(429\) and the pod annotated cao.couchbase.com\/reschedule=true/,
    );
  });

  it('a waiting pod is allowed too (a 429 would loop kubectl drain --dry-run=server forever)', () => {
    const d = decide({
      eviction: facts({ requestDryRun: true }),
      pod: found(pod({ annotations: { [ANNOTATION]: 'true' } })),
    });
    assert.equal(d.answer.allowed, true);
    assert.deepEqual(d.effects, []);
  });

  it("other denials keep their code, with the reference's suffix and warning", () => {
    const gone = decide({ eviction: kubectlDryRun, pod: { kind: 'not-found' } });
    assert.deepEqual(gone.answer, {
      allowed: false,
      status: failure(404, `Pod no longer exists${DRY_RUN_SUFFIX}`),
      warnings: [DRY_RUN_WARNING],
    });
    const replaced = decide({
      eviction: kubectlDryRun,
      pod: found(pod({ node: 'node-b' })),
      podNode: nodeFound(node('node-b')),
      records: stored(rec()),
    });
    assert.deepEqual(
      replaced.answer.status,
      failure(404, `Pod has been rescheduled with the same name${DRY_RUN_SUFFIX}`),
    );
    assert.deepEqual(replaced.effects, [], 'the record is not consumed');
    const transient = decide({ eviction: kubectlDryRun, pod: { kind: 'failed', error: 'x', transient: true } });
    assert.deepEqual(transient.answer.status, failure(429, `Failed to get pod${DRY_RUN_SUFFIX}`));
    assert.deepEqual(transient.answer.warnings?.at(-1), DRY_RUN_WARNING);
  });

  it('an unselected pod is plainly allowed', () => {
    assert.deepEqual(decide({ eviction: kubectlDryRun, pod: found(pod({ labels: {} })) }).answer, { allowed: true });
  });
});

describe('readEviction', { timeout: 10000 }, () => {
  const request = (o: Partial<AdmissionRequestV1> = {}): AdmissionRequestV1 => ({
    uid: 'r1',
    operation: 'CREATE',
    resource: { group: '', version: 'v1', resource: 'pods' },
    subResource: 'eviction',
    name: NAME,
    namespace: NS,
    userInfo: { username: 'system:serviceaccount:kube-system:karpenter' },
    object: {
      apiVersion: 'policy/v1',
      kind: 'Eviction',
      metadata: { name: NAME, namespace: NS },
      deleteOptions: { dryRun: ['All'], preconditions: { uid: 'uid-a' } },
    },
    ...o,
  });

  it("reads kubectl's body dry run, the UID precondition and the requester", () => {
    const r = readEviction(request());
    assert.ok(r.ok);
    assert.deepEqual(r.facts, {
      namespace: NS,
      name: NAME,
      requestDryRun: false,
      deleteOptionsDryRun: ['All'],
      preconditionUid: 'uid-a',
      requestedBy: 'system:serviceaccount:kube-system:karpenter',
    });
  });

  it('takes name and namespace from the request, the body only filling gaps', () => {
    const r = readEviction(
      request({
        name: 'from-url',
        namespace: undefined,
        dryRun: true,
        object: { metadata: { name: 'x', namespace: 'from-body' } },
      }),
    );
    assert.ok(r.ok);
    assert.equal(r.facts.name, 'from-url');
    assert.equal(r.facts.namespace, 'from-body');
    assert.equal(r.facts.requestDryRun, true);
    assert.equal(r.facts.preconditionUid, undefined);
  });

  it('anything but CREATE pods/eviction is allowed with a warning', () => {
    const r = readEviction(request({ operation: 'DELETE', subResource: undefined }));
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.equal(r.answer.allowed, true);
      assert.match(r.answer.warnings?.[0] ?? '', /DELETE pods is not a pod eviction/);
    }
    assert.equal(readEviction(request({ name: undefined, object: {} })).ok, false);
  });
});

describe('tracking records', { timeout: 10000 }, () => {
  it('encode and decode are inverse', () => {
    const record = fc.record(
      {
        uid: fc.stringMatching(/^[-._a-zA-Z0-9]{1,40}$/),
        pod: fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/),
        node: fc.stringMatching(/^[a-z0-9.-]{0,30}$/),
        requestedAt: fc.integer({ min: 0, max: 4e12 }),
        refreshedAt: fc.integer({ min: 0, max: 1e10 }),
        requestedBy: fc.string(),
      },
      { requiredKeys: ['uid', 'pod', 'node', 'requestedAt', 'refreshedAt'] },
    );
    fc.assert(
      fc.property(record, (r) => {
        const original: TrackingRecord = { ...r, refreshedAt: r.requestedAt + r.refreshedAt };
        const { key, value } = encodeRecord(original);
        assert.deepEqual(decodeRecord(key, value), { ok: true, record: original });
      }),
    );
  });

  it('refuses what it did not write', () => {
    const good = JSON.parse(encodeRecord(rec()).value) as Record<string, unknown>;
    const cases: [string, string, RegExp][] = [
      ['uid-old', '{', /not JSON/],
      ['uid-old', '[]', /not a JSON object/],
      ['uid old', JSON.stringify(good), /key is not a pod UID/],
      ['uid-x', JSON.stringify(good), /uid does not match the key/],
      ['uid-old', JSON.stringify({ ...good, v: 0 }), /format version 0/],
      ['uid-old', JSON.stringify({ ...good, pod: 'Not_A_Pod' }), /pod is not a pod name/],
      ['uid-old', JSON.stringify({ ...good, node: 7 }), /node is not a string/],
      ['uid-old', JSON.stringify({ ...good, requestedAt: 1735787045000 }), /requestedAt is not an RFC 3339/],
      ['uid-old', JSON.stringify({ ...good, refreshedAt: '2025-01-02 03:04:05' }), /refreshedAt is not an RFC 3339/],
      [
        'uid-old',
        JSON.stringify({ ...good, refreshedAt: '2000-01-01T00:00:00Z' }),
        /refreshedAt is before requestedAt/,
      ],
      ['uid-old', JSON.stringify({ ...good, requestedBy: 5 }), /requestedBy is not a string/],
    ];
    for (const [key, value, problem] of cases) {
      const d = decodeRecord(key, value);
      assert.equal(d.ok, false, value);
      if (!d.ok) assert.match(d.problem, problem);
    }
    assert.deepEqual(decodeRecords(undefined), { records: [], malformed: [], warnings: [] });
  });

  it('expiry: TTL from the last refresh, and far-future stamps are expired', () => {
    assert.equal(recordExpired(rec({ refreshedAt: NOW - HOUR + 1 }), NOW, HOUR), false);
    assert.equal(recordExpired(rec({ refreshedAt: NOW - HOUR }), NOW, HOUR), true);
    assert.equal(recordExpired(rec({ refreshedAt: NOW + HOUR }), NOW, HOUR), false);
    assert.equal(recordExpired(rec({ refreshedAt: NOW + HOUR + 1 }), NOW, HOUR), true);
  });

  it('nodeIsDraining: cordon or a listed taint', () => {
    assert.equal(nodeIsDraining(node('n', { cordoned: true }), []), true);
    assert.equal(nodeIsDraining(node('n', { taints: ['ToBeDeletedByClusterAutoscaler'] }), CONFIG.drainTaints), true);
    assert.equal(nodeIsDraining(node('n'), CONFIG.drainTaints), false);
    assert.equal(nodeIsDraining({ metadata: { name: 'n' } }, CONFIG.drainTaints), false);
  });

  it('newTrackingConfigMap holds only the records set', () => {
    const effect = recordsEffect(
      decide({ records: stored(rec({ uid: 'uid-x', pod: 'cb-0009', refreshedAt: NOW - 2 * HOUR })) }),
    );
    const cm = newTrackingConfigMap(effect);
    assert.equal(cm.metadata?.name, 'stateward-reschedule-tracking');
    assert.equal(cm.metadata?.namespace, NS);
    assert.deepEqual(Object.keys(cm.data ?? {}), ['uid-new']);
  });
});

describe('scenarios: a drain against a simulated operator', { timeout: 10000 }, () => {
  function world(): World {
    const w = new World();
    w.nodes.set('node-a', node('node-a', { cordoned: true })); // being drained
    w.nodes.set('node-b', node('node-b'));
    w.pods.set(NAME, pod({ uid: 'uid-1', node: 'node-a' }));
    return w;
  }

  it('same-name recreation: 429, 429 while waiting, 404 once, then a fresh pod is judged afresh', () => {
    const w = world();
    assert.equal(w.evict(NAME).answer.status?.message, MESSAGES.annotationAdded);
    assert.equal(w.pods.get(NAME)?.metadata?.annotations?.[ANNOTATION], 'true');
    w.now += 5_000;
    assert.equal(w.evict(NAME).answer.status?.message, MESSAGES.podWaiting);
    w.recreate(NAME, 'uid-2', 'node-b');
    w.now += 5_000;
    const released = w.evict(NAME);
    assert.deepEqual(released.answer.status, failure(404, MESSAGES.replacedSameName));
    assert.deepEqual(
      Object.values(w.trackingData ?? {}).map((v) => (JSON.parse(v) as { releasedTo?: string }).releasedTo),
      ['uid-2'],
      'consumed: released to the replacement',
    );
    // The other webhook configuration judging the same eviction (Strimzi's
    // /drainer beside Couchbase's path) reads the records just after: it agrees.
    const second = w.evict(NAME);
    assert.deepEqual(second.answer.status, failure(404, MESSAGES.replacedSameName));
    assert.equal(
      w.pods.get(NAME)?.metadata?.annotations?.[ANNOTATION],
      undefined,
      'the replacement is not asked to move',
    );
    // Later, node-b is drained: the same pod is asked to move, not released.
    w.nodes.set('node-b', node('node-b', { cordoned: true }));
    w.now += 10 * MINUTE;
    assert.equal(w.evict(NAME).answer.status?.message, MESSAGES.annotationAdded);
  });

  it('a release answers its replacement 404 only while the webhooks of that eviction are judging it: afterwards the pod is judged afresh', () => {
    const w = world();
    w.evict(NAME);
    w.recreate(NAME, 'uid-2', 'node-b');
    assert.equal(w.evict(NAME).outcome, 'replaced');
    w.now += RELEASE_AGREEMENT_MS - 1;
    assert.equal(w.evict(NAME).outcome, 'replaced', 'a late judge of the same eviction agrees');
    w.now += 1;
    assert.equal(w.evict(NAME).outcome, 'reschedule-requested', 'a later eviction of the replacement');
    assert.ok(
      Object.values(w.trackingData ?? {}).every(
        (v) => (JSON.parse(v) as { releasedTo?: string }).releasedTo === undefined,
      ),
      'the released record is gone with that write',
    );
  });

  it('renamed replacement: 404 "Pod no longer exists"', () => {
    const w = world();
    w.evict(NAME);
    w.pods.delete(NAME);
    assert.deepEqual(w.evict(NAME).answer.status, failure(404, MESSAGES.podGone));
  });

  it('a leftover record from an interrupted drain cannot release a pod on a node drained later', () => {
    const w = world();
    w.evict(NAME); // drain of node-a interrupted here; the operator still moves the pod
    w.recreate(NAME, 'uid-2', 'node-b');
    w.nodes.set('node-b', node('node-b', { cordoned: true })); // node-b drained within the TTL
    w.now += 5 * MINUTE;
    assert.equal(w.evict(NAME).outcome, 'reschedule-requested');
  });

  it('a leftover record past its TTL cannot release anything, even on an undrained node', () => {
    const w = world();
    w.evict(NAME);
    w.recreate(NAME, 'uid-2', 'node-b');
    w.now += 2 * HOUR;
    assert.equal(w.evict(NAME).outcome, 'reschedule-requested');
  });

  it("Karpenter retrying with the old UID is left to the API server's 409", () => {
    const w = world();
    w.evict(NAME, { preconditionUid: 'uid-1' });
    w.recreate(NAME, 'uid-2', 'node-b');
    const d = w.evict(NAME, { preconditionUid: 'uid-1' });
    assert.equal(d.answer.allowed, true);
    assert.deepEqual(d.effects, []);
  });
});

// ---------------------------------------------------------------- properties

const UIDS = ['uid-1', 'uid-2', 'uid-3'];
const NAMES = [NAME, 'cb-0001'];
const NODES = ['', 'node-a', 'node-b'];

const arbRecord: fc.Arbitrary<TrackingRecord> = fc
  .record({
    uid: fc.constantFrom(...UIDS),
    pod: fc.constantFrom(...NAMES),
    node: fc.constantFrom(...NODES),
    age: fc.integer({ min: -3 * HOUR, max: 3 * HOUR }),
  })
  .map(({ uid, pod: p, node: n, age }) => ({ uid, pod: p, node: n, requestedAt: NOW - age, refreshedAt: NOW - age }));

const arbRecordsData = fc
  .tuple(
    fc.array(arbRecord, { maxLength: 4 }),
    fc.dictionary(fc.constantFrom('junk', 'uid-9'), fc.constantFrom('true', '{}', '{"v":9}'), { maxKeys: 2 }),
  )
  .map(([records, junk]) => ({ ...junk, ...Object.fromEntries(records.map((r) => [r.uid, encodeRecord(r).value])) }));

const arbRecords: fc.Arbitrary<RecordsLookup> = fc.oneof(
  arbRecordsData.map((data): RecordsLookup => ({ kind: 'found', data })),
  fc.constant<RecordsLookup>({ kind: 'found', data: undefined }),
  fc.constant<RecordsLookup>({ kind: 'failed', error: 'x', transient: true }),
);

const arbPodOptions = fc.record({
  uid: fc.constantFrom(...UIDS),
  node: fc.constantFrom(...NODES),
  labels: fc.constantFrom<Record<string, string>>(
    { app: 'couchbase' },
    { app: 'couchbase', tier: 'data' },
    { app: 'nginx' },
    {},
  ),
  annotations: fc.constantFrom<Record<string, string>>({}, { [ANNOTATION]: 'true' }, { [ANNOTATION]: 'false' }),
});

const arbPodLookup: fc.Arbitrary<PodLookup> = fc.oneof(
  arbPodOptions.map((o) => found(pod(o))),
  fc.constant<PodLookup>({ kind: 'not-found' }),
  fc.boolean().map((transient): PodLookup => ({ kind: 'failed', error: 'x', transient })),
);

const arbNodeLookup: fc.Arbitrary<NodeLookup | undefined> = fc.oneof(
  fc.constant(undefined),
  fc
    .record({
      name: fc.constantFrom('node-a', 'node-b'),
      cordoned: fc.boolean(),
      taints: fc.subarray(['karpenter.sh/disrupted', 'example.com/x']),
    })
    .map((o) => nodeFound(node(o.name, o))),
  fc.constant<NodeLookup>({ kind: 'not-found' }),
  fc.constant<NodeLookup>({ kind: 'failed', error: 'x', transient: true }),
);

const arbFacts = fc.record({
  requestDryRun: fc.boolean(),
  deleteOptionsDryRun: fc.constantFrom<string[]>([], ['All']),
  preconditionUid: fc.option(fc.constantFrom(...UIDS), { nil: undefined }),
});

const arbConfig = fc.constantFrom(
  CONFIG,
  config({ track: false }),
  config({ namespaces: 'other' }),
  config({ recordTtl: '10m' }),
);

function inputOf(
  f: { requestDryRun: boolean; deleteOptionsDryRun: string[]; preconditionUid: string | undefined },
  rest: Omit<RescheduleInput, 'eviction' | 'now'>,
): RescheduleInput {
  const eviction = facts({ requestDryRun: f.requestDryRun, deleteOptionsDryRun: f.deleteOptionsDryRun });
  if (f.preconditionUid !== undefined) eviction.preconditionUid = f.preconditionUid;
  return { ...rest, eviction, now: NOW };
}

describe('properties', { timeout: 10000 }, () => {
  it('a dry run never yields side effects', () => {
    const how = fc.constantFrom('request', 'body', 'both');
    fc.assert(
      fc.property(arbFacts, how, arbPodLookup, arbNodeLookup, arbRecords, arbConfig, (f, via, p, n, r, c) => {
        const flags = { requestDryRun: via !== 'body', deleteOptionsDryRun: via === 'request' ? [] : ['All'] };
        const d = decideReschedule(inputOf({ ...f, ...flags }, { pod: p, podNode: n, records: r, config: c }));
        assert.equal(d.dryRun, true);
        assert.deepEqual(d.effects, []);
      }),
    );
  });

  it('a selected, present pod with no record of its name is never released (404) nor allowed', () => {
    fc.assert(
      fc.property(arbPodOptions, arbNodeLookup, fc.array(arbRecord, { maxLength: 4 }), (o, n, recs) => {
        const p = pod({ ...o, labels: { app: 'couchbase' } });
        // Records may exist for other pod names, and for this very pod (its own UID).
        const others = recs.filter((r) => r.pod !== NAME || r.uid === o.uid);
        const d = decideReschedule({
          eviction: facts(),
          pod: found(p),
          podNode: n,
          records: stored(...others),
          config: CONFIG,
          now: NOW,
        });
        assert.equal(d.answer.allowed, false);
        assert.equal(d.answer.status?.code, 429, JSON.stringify(d.answer));
      }),
    );
  });

  it("a stale record of another UID (expired, on the pod's own node, without a node, or the pod on a draining node) never releases a present pod", () => {
    const arbStale = fc
      .record({
        o: arbPodOptions,
        node: fc.constantFrom('node-a', 'node-b'),
        recordNode: fc.constantFrom('node-a', 'node-b'),
        why: fc.constantFrom('expired', 'same-node', 'no-node', 'draining-node'),
        overdue: fc.integer({ min: 0, max: 3 * HOUR }),
        age: fc.integer({ min: 0, max: HOUR - 1 }),
      })
      .map(({ o, node: nodeName, recordNode, why, overdue, age }) => {
        const p = pod({ ...o, labels: { app: 'couchbase' }, node: nodeName });
        const uid = o.uid === 'uid-1' ? 'uid-2' : 'uid-1'; // another pod of this name
        const refreshedAt = why === 'expired' ? NOW - HOUR - overdue : NOW - age;
        const record: TrackingRecord = {
          uid,
          pod: NAME,
          node: why === 'same-node' ? nodeName : why === 'no-node' ? '' : recordNode,
          requestedAt: refreshedAt,
          refreshedAt,
        };
        return { p, record, podNode: nodeFound(node(nodeName, { cordoned: why === 'draining-node' })) };
      });
    fc.assert(
      fc.property(
        arbStale,
        fc.array(
          arbRecord.filter((r) => r.pod !== NAME),
          { maxLength: 2 },
        ),
        fc.boolean(),
        ({ p, record, podNode }, others, dryRun) => {
          const d = decideReschedule({
            eviction: facts({ requestDryRun: dryRun }),
            pod: found(p),
            podNode,
            records: stored(...others.filter((r) => r.uid !== record.uid), record),
            config: CONFIG,
            now: NOW,
          });
          assert.notEqual(d.answer.status?.code, 404, JSON.stringify(d.answer));
          if (!dryRun) assert.equal(d.answer.allowed, false);
        },
      ),
    );
  });

  it('an unselected pod is always allowed, with nothing done', () => {
    const unselected = fc.constantFrom<Record<string, string>>({ app: 'nginx' }, {}, { tier: 'couchbase' });
    fc.assert(
      fc.property(
        arbFacts,
        arbPodOptions,
        unselected,
        arbNodeLookup,
        arbRecords,
        arbConfig,
        (f, o, labels, n, r, c) => {
          const d = decideReschedule(
            inputOf(f, { pod: found(pod({ ...o, labels })), podNode: n, records: r, config: c }),
          );
          assert.deepEqual(d.answer.allowed, true);
          assert.deepEqual(d.effects, []);
        },
      ),
    );
  });

  it('whatever it sees, the answer is a known code, never 500 unless a failure was permanent', () => {
    assertReaching(
      fc.tuple(arbFacts, arbPodLookup, arbNodeLookup, arbRecords, arbConfig),
      ([f, p, n, r, c]) => {
        const d = decideReschedule(inputOf(f, { pod: p, podNode: n, records: r, config: c }));
        if (d.answer.allowed) return SKIP;
        const code = d.answer.status?.code;
        assert.ok(code === 404 || code === 429 || code === 500, String(code));
        if (code === 500) assert.ok(p.kind === 'failed' && !p.transient);
        // A release only ever happens for a pod that is gone or replaced.
        if (code === 404) assert.ok(p.kind === 'not-found' || d.outcome === 'replaced');
      },
      { floor: 0.25 },
    );
  });

  it('a release always consumes the releasing records (released to this pod alone); asking to move always records before annotating', () => {
    fc.assert(
      fc.property(arbPodOptions, arbNodeLookup, arbRecordsData, (o, n, data) => {
        const d = decideReschedule({
          eviction: facts(),
          pod: found(pod({ ...o, labels: { app: 'couchbase' } })),
          podNode: n,
          records: { kind: 'found', data },
          config: CONFIG,
          now: NOW,
        });
        if (d.outcome === 'replaced') {
          // After the write, no record of an earlier pod of the name can release any pod but this one.
          const after = { ...data };
          for (const e of d.effects)
            if (e.kind === 'update-records')
              for (const [k, v] of Object.entries(e.patch.data)) {
                if (v === null) delete after[k];
                else after[k] = v;
              }
          const earlier = decodeRecords(after).records.filter((r) => r.pod === NAME && r.uid !== o.uid);
          assert.ok(earlier.every((r) => r.releasedTo === o.uid));
        }
        if (d.outcome === 'reschedule-requested')
          assert.deepEqual(
            d.effects.map((e) => e.kind),
            ['update-records', 'annotate-pod'],
          );
      }),
    );
  });

  it('drain safety over random histories: a pod on a draining node is never released', () => {
    type Action =
      | { kind: 'evict'; name: string; dryRun: boolean }
      | { kind: 'recreate'; name: string; node: string }
      | { kind: 'delete'; name: string }
      | { kind: 'cordon'; node: string; on: boolean }
      | { kind: 'tick'; ms: number };
    const name = fc.constantFrom(...NAMES);
    const nodeName = fc.constantFrom('node-a', 'node-b', 'node-c');
    const action: fc.Arbitrary<Action> = fc.oneof(
      { arbitrary: fc.record({ kind: fc.constant('evict' as const), name, dryRun: fc.boolean() }), weight: 4 },
      fc.record({ kind: fc.constant('recreate' as const), name, node: nodeName }),
      fc.record({ kind: fc.constant('delete' as const), name }),
      fc.record({ kind: fc.constant('cordon' as const), node: nodeName, on: fc.boolean() }),
      fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1_000, max: 40 * MINUTE }) }),
    );
    const seen = new Set<string>();
    fc.assert(
      fc.property(fc.array(action, { maxLength: 30 }), (actions) => {
        const w = new World();
        for (const n of ['node-a', 'node-b', 'node-c']) w.nodes.set(n, node(n));
        for (const n of NAMES) w.pods.set(n, pod({ name: n, uid: `${n}-uid-0`, node: 'node-a' }));
        let serial = 0;
        for (const a of actions) {
          if (a.kind === 'tick') w.now += a.ms;
          else if (a.kind === 'cordon') w.nodes.set(a.node, node(a.node, { cordoned: a.on }));
          else if (a.kind === 'delete') w.pods.delete(a.name);
          else if (a.kind === 'recreate')
            w.pods.set(a.name, pod({ name: a.name, uid: `${a.name}-uid-${++serial}`, node: a.node }));
          else {
            const before = w.pods.get(a.name);
            const d = w.evict(a.name, a.dryRun ? { deleteOptionsDryRun: ['All'] } : {});
            seen.add(d.outcome);
            if (before === undefined) {
              assert.equal(d.answer.status?.code, 404);
              continue;
            }
            const onDrainingNode = w.nodes.get(before.spec?.nodeName ?? '')?.spec?.unschedulable === true;
            if (onDrainingNode) assert.notEqual(d.answer.status?.code, 404, 'released a pod on a draining node');
            if (!a.dryRun) assert.equal(d.answer.allowed, false, 'a managed pod is never simply evicted');
            if (d.outcome === 'reschedule-requested' && !a.dryRun)
              assert.equal(w.pods.get(a.name)?.metadata?.annotations?.[ANNOTATION], 'true');
          }
        }
      }),
      { numRuns: 300 },
    );
    // Not vacuous: the histories did reach the interesting paths.
    for (const outcome of ['replaced', 'reschedule-requested', 'waiting', 'pod-gone'])
      assert.ok(seen.has(outcome), `${outcome} never reached: ${[...seen].join(', ')}`);
  });
});
