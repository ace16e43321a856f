// Fuzzing custom resources: ZoneAwarePodDisruptionBudget specs of any shape
// through parseZpdb, the partition regexes it accepts against pod names (the
// eviction webhook runs them on every pod of a group, per eviction), and
// ReplicaTemplate-shaped scale objects through the mirror path of replica
// scaling. Nothing may throw, every call returns within a time bound, and
// what is accepted is usable.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseZpdb, podPartition, type ZpdbConfig } from '../../src/drain/zpdb/zpdbresource.ts';
import type { StatefulSet } from '../../src/runtime/kube/types.ts';
import { planGroupReplicas } from '../../src/downscale/coordination/replicaplan.ts';
import { forceReplicasOverride } from '../../src/downscale/coordination/scalingfields.ts';
import { mirrorReference, mirrorTarget, writeBack } from '../../src/downscale/coordination/mirror.ts';
import {
  delayedDownscaleCalls,
  delayedDownscaleConfig,
  delayedDownscaleDecision,
} from '../../src/downscale/coordination/delay.ts';
import { validateScalingMetadata } from '../../src/downscale/coordination/validate.ts';
import {
  adversarialNames,
  capturingRegexSource,
  materialize,
  metadataValue,
  mutated,
  params,
  weirdValue,
  within,
  PARSE_BUDGET_MS,
} from './support.ts';
import {
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY,
  DOWNSCALE_LEADER_ANNOTATION_KEY,
  FORCE_REPLICAS_ANNOTATION_KEY,
  MIRROR_API_VERSION_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_NAME_ANNOTATION_KEY,
  MIRROR_WRITE_BACK_ANNOTATION_KEY,
} from '../../src/vocabulary/keys.ts';
import { assertReaching, SKIP } from '../support/reach.ts';

/** Per call; the eviction webhook calls podPartition once per pod of the group. */
const BUDGET_MS = PARSE_BUDGET_MS;

// ------------------------------------------------------------------ ZPDB

const validZpdb = fc.record({
  apiVersion: fc.constant('rollout-operator.grafana.com/v1'),
  kind: fc.constant('ZoneAwarePodDisruptionBudget'),
  metadata: fc.record({
    name: fc.constantFrom('ingester', 'store-gateway'),
    namespace: fc.constant('ns'),
    generation: fc.nat(5),
  }),
  spec: fc.record(
    {
      maxUnavailable: fc.nat(3),
      maxUnavailablePercentage: fc.integer({ min: 0, max: 100 }),
      selector: fc.record({
        matchLabels: fc.dictionary(fc.constantFrom('app', 'name', 'zone'), fc.constantFrom('ingester', 'a', '')),
      }),
      podNamePartitionRegex: fc.constantFrom(
        '[a-z\\-]+-zone-[a-z]-([0-9]+)',
        'ingester-zone-[a-z]-(\\d+)',
        '(?P<partition>[a-z]+)-\\d+',
      ),
      podNameRegexGroup: fc.constant(1),
      crossZoneEvictionDelay: fc.constantFrom('20m', '0s', ''),
    },
    { requiredKeys: ['selector'] },
  ),
});

/** Any shape at all: mutated valid budgets (deep nesting made real), random JSON, and the odd primitive. */
const anyZpdb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: mutated(validZpdb).map(materialize) },
  { weight: 1, arbitrary: fc.jsonValue() },
  { weight: 1, arbitrary: weirdValue.map(materialize) },
);

function checkConfig(config: ZpdbConfig): void {
  const budget = config.maxUnavailable;
  assert.ok(Number.isSafeInteger(budget.value) && budget.value >= 0, `max unavailable ${budget.value}`);
  if (budget.kind === 'percentage') assert.ok(budget.value <= 100);
  for (const value of Object.values(config.matchLabels)) assert.equal(typeof value, 'string');
  assert.ok(Number.isFinite(config.crossZoneEvictionDelayMs) && config.crossZoneEvictionDelayMs >= 0);
  if (config.partition === undefined) assert.equal(config.crossZoneEvictionDelayMs, 0);
  else assert.ok(config.partition.group >= 1);
}

const podNames = adversarialNames(
  ['ingester-zone-a-0', 'ingester-zone-b-12', 'store-gateway-zone-c-3', ''],
  ['a', 'b', '-', 'zone', 'ab', 'a-', '0'],
  ['', '!', '-0', 'b', 'zz'],
);

describe('fuzz: ZoneAwarePodDisruptionBudget specs', { timeout: 120_000 }, () => {
  it('parseZpdb answers any object, in time, with a usable config or an error', () => {
    fc.assert(
      fc.property(anyZpdb, (obj) => {
        const result = within(BUDGET_MS, 'parseZpdb', () => parseZpdb(obj));
        if ('error' in result) assert.ok(typeof result.error === 'string' && result.error !== '');
        else checkConfig(result.config);
      }),
      params(1200, 11),
    );
  });

  it('a partition regex it accepts finds the partition of any pod name in time', () => {
    assertReaching(
      fc.tuple(capturingRegexSource, podNames),
      ([regex, names]) => {
        const parsed = parseZpdb({
          kind: 'ZoneAwarePodDisruptionBudget',
          metadata: { name: 'b', namespace: 'ns' },
          spec: {
            selector: { matchLabels: {} },
            maxUnavailable: 1,
            podNamePartitionRegex: regex,
            podNameRegexGroup: 1,
          },
        });
        if ('error' in parsed) return SKIP;
        for (const name of names) {
          const partition = within(BUDGET_MS, `podPartition(/${regex}/, ${JSON.stringify(name)})`, () =>
            podPartition(parsed.config, name),
          );
          assert.ok(partition === undefined || typeof partition === 'string' || typeof partition.error === 'string');
        }
      },
      // A failing regex costs up to ~10× the budget per try: shrinking stops after 20 s with the best counterexample so far.
      { ...params(600, 12), interruptAfterTimeLimit: 20_000, floor: 0.5 },
    );
  });
});

// ------------------------------------------------- mirror-resource mode

const scalingAnnotationKeys = [
  MIRROR_NAME_ANNOTATION_KEY,
  MIRROR_KIND_ANNOTATION_KEY,
  MIRROR_API_VERSION_ANNOTATION_KEY,
  MIRROR_WRITE_BACK_ANNOTATION_KEY,
  FORCE_REPLICAS_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_ANNOTATION_KEY,
  DELAYED_DOWNSCALE_URL_ANNOTATION_KEY,
  DOWNSCALE_LEADER_ANNOTATION_KEY,
];

const usualAnnotation: Record<string, string> = {
  [MIRROR_NAME_ANNOTATION_KEY]: 'ingester',
  [MIRROR_KIND_ANNOTATION_KEY]: 'ReplicaTemplate',
  [MIRROR_API_VERSION_ANNOTATION_KEY]: 'rollout-operator.grafana.com/v1',
  [MIRROR_WRITE_BACK_ANNOTATION_KEY]: 'true',
  [FORCE_REPLICAS_ANNOTATION_KEY]: '3',
  [DELAYED_DOWNSCALE_ANNOTATION_KEY]: '4h',
  [DELAYED_DOWNSCALE_URL_ANNOTATION_KEY]: 'http://pod:8080/ingester/prepare-instance-ring-downscale',
  [DOWNSCALE_LEADER_ANNOTATION_KEY]: 'ingester-zone-a',
};

/** A mirroring StatefulSet: each scaling annotation absent, usual, or anything. */
const mirroringSts = (name: string): fc.Arbitrary<StatefulSet> =>
  fc
    .record({
      annotations: fc.record(
        Object.fromEntries(
          scalingAnnotationKeys.map((k) => [
            k,
            fc.oneof(
              { weight: 3, arbitrary: fc.constant(usualAnnotation[k]!) },
              { weight: 2, arbitrary: metadataValue },
            ),
          ]),
        ),
        { requiredKeys: [] },
      ),
      replicas: fc.oneof(fc.integer({ min: 0, max: 12 }), fc.constantFrom(undefined, 1_000)),
      ready: fc.nat(12),
    })
    .map(({ annotations, replicas, ready }) => ({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {
        name,
        namespace: 'ns',
        annotations: annotations as Record<string, string>,
        labels: { 'rollout-group': 'ingester' },
      },
      spec: { ...(replicas === undefined ? {} : { replicas }), serviceName: 'ingester', selector: {}, template: {} },
      status: { replicas: replicas ?? 1, readyReplicas: ready },
    }));

/** What GET …/replicatemplates/<name>/scale can answer, and worse. */
const replicaTemplateScale: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      apiVersion: fc.constant('autoscaling/v1'),
      kind: fc.constant('Scale'),
      spec: fc.record({ replicas: fc.integer({ min: 0, max: 12 }) }),
      status: fc.record({ replicas: fc.nat(12), selector: fc.constant('app=ingester') }),
    }),
  },
  {
    weight: 3,
    arbitrary: mutated(
      fc.record({ spec: fc.record({ replicas: fc.nat(12) }), status: fc.record({ replicas: fc.nat(12) }) }),
    ),
  },
  { weight: 1, arbitrary: weirdValue },
);

describe('fuzz: ReplicaTemplate-shaped scales through the mirror path', { timeout: 120_000 }, () => {
  it('reads any annotations and any scale without throwing, in time, with a consistent target', () => {
    assertReaching(
      fc.tuple(
        fc.tuple(mirroringSts('ingester-zone-a'), mirroringSts('ingester-zone-b')),
        replicaTemplateScale,
        fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }),
      ),
      ([[a, b], scale, now]) => {
        within(BUDGET_MS, 'validateScalingMetadata', () => validateScalingMetadata(a));
        const plan = within(BUDGET_MS, 'planGroupReplicas', () => planGroupReplicas({ group: [a, b], now }));
        for (const change of plan.changes)
          assert.ok(Number.isSafeInteger(change.to) && change.to >= 0, `a change to ${change.to}`);
        const reference = within(BUDGET_MS, 'mirrorReference', () => mirrorReference(a));
        if (reference === undefined) return SKIP; // counted as reaching from a reference on
        if ('error' in reference) {
          assert.ok(reference.error !== '');
          return;
        }
        assert.ok(reference.name !== '' && reference.kind !== '');
        writeBack(a.metadata?.annotations?.[MIRROR_WRITE_BACK_ANNOTATION_KEY]);
        // As the executor reads the reference's scale.
        const spec = (scale as { spec?: { replicas?: number } } | null | undefined)?.spec;
        const referenceReplicas = spec?.replicas ?? 0;
        const target = within(BUDGET_MS, 'mirrorTarget', () => mirrorTarget({ sts: a, referenceReplicas }));
        const force = forceReplicasOverride(a);
        if (force !== undefined && 'replicas' in force) assert.equal(target.target, force.replicas);
        else assert.equal(target.target, referenceReplicas);
        assert.equal(
          target.action,
          target.target === target.current ? 'in-sync' : target.target > target.current ? 'scale-up' : 'scale-down',
        );
        const delay = within(BUDGET_MS, 'delayedDownscaleConfig', () => delayedDownscaleConfig(a));
        if (delay === undefined || 'error' in delay || target.action !== 'scale-down') return;
        if (!Number.isSafeInteger(target.target) || target.target < 0) return;
        // Which pods are asked, and how far the downscale may go once they answer.
        const calls = within(BUDGET_MS, 'delayedDownscaleCalls', () =>
          delayedDownscaleCalls({ current: target.current, desired: target.target }),
        );
        assert.deepEqual(
          [...calls.cancel, ...calls.prepare],
          Array.from({ length: target.current }, (_, i) => i),
        );
        const timestamps = new Map(
          calls.prepare.map((ordinal) => [ordinal, Math.floor(now / 1000) - 3600 * (ordinal % 7)]),
        );
        const decision = within(BUDGET_MS, 'delayedDownscaleDecision', () =>
          delayedDownscaleDecision({
            current: target.current,
            desired: target.target,
            timestamps,
            delayMs: delay.delayMs,
            now,
          }),
        );
        if ('allowed' in decision) assert.ok(decision.allowed >= target.target && decision.allowed < target.current);
      },
      { ...params(1000, 13), floor: 0.5 },
    );
  });
});

// ---------------------------------------------------------- regressions
// Each failure the properties above found, as its shrunk counterexample.

describe('fuzz regressions: custom resources', { timeout: 120_000 }, () => {
  const zpdb = (podNamePartitionRegex: string) => ({
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name: 'b', namespace: 'ns' },
    spec: { selector: { matchLabels: {} }, maxUnavailable: 1, podNamePartitionRegex, podNameRegexGroup: 1 },
  });

  it('a partition regex that backtracks catastrophically in JavaScript is accepted and runs in linear time (was: accepted, 23 "a"s + "zz" took > 50 ms per pod name, doubling with each "a"; then refused, which rollout-operator does not)', () => {
    const parsed = parseZpdb(zpdb('(?:(?:a*)*a*)a(a)a*'));
    assert.ok('config' in parsed, JSON.stringify(parsed));
    for (const n of [23, 100, 251])
      within(BUDGET_MS, `podPartition(${n} "a"s + "zz")`, () => podPartition(parsed.config, `${'a'.repeat(n)}zz`));
  });

  it('a 1,000,000-character partition regex is refused, not thrown (was: "Regular expression too large" thrown by parseZpdb)', () => {
    const parsed = within(BUDGET_MS, 'parseZpdb', () => parseZpdb(zpdb('x'.repeat(1_000_000))));
    assert.ok('error' in parsed);
    assert.match(parsed.error, /^invalid value: regex is not valid, got error parsing regexp: /);
  });
});
