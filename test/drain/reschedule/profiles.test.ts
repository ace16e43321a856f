import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { stringify as toYaml } from 'yaml';
import type { Pod } from '../../../src/runtime/kube/types.ts';
import {
  decideReschedule,
  encodeRecord,
  MESSAGES,
  STRIMZI_MESSAGE,
  type EvictionFacts,
  type RescheduleInput,
} from '../../../src/drain/reschedule/decide.ts';
import {
  parseRescheduleConfig,
  profileSelects,
  type RescheduleConfig,
  type RescheduleConfigInput,
} from '../../../src/drain/reschedule/rescheduleconfig.ts';
import { patternsApart, profilesOverlap } from '../../../src/drain/reschedule/profileoverlap.ts';
import {
  chooseProfile,
  parseProfilesFile,
  profilesProblems,
  STRIMZI_ANNOTATION,
  strimziProfileInput,
  type StrimziSettings,
} from '../../../src/drain/reschedule/profiles.ts';
import { formatLabelSelector } from '../../support/selectors.ts';

const NOW = Date.parse('2026-11-29T10:00:00Z');

function profile(input: RescheduleConfigInput): RescheduleConfig {
  const parsed = parseRescheduleConfig(input);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.errors.join('; '));
  return parsed.config;
}

const STRIMZI_DEFAULTS: StrimziSettings = {
  denyEviction: true,
  drainKafka: true,
  drainZooKeeper: true,
  namespaces: '',
  denyCode: 429,
};

function strimzi(o: Partial<StrimziSettings> = {}): RescheduleConfig {
  const input = strimziProfileInput({ ...STRIMZI_DEFAULTS, ...o });
  assert.ok(input.ok);
  return profile(input.ok ? input.input : {});
}

function pod(labels: Record<string, string>, o: { annotations?: Record<string, string>; owner?: string } = {}): Pod {
  return {
    metadata: {
      name: 'p-0',
      namespace: 'ns',
      uid: 'uid-1',
      labels,
      annotations: o.annotations ?? {},
      ...(o.owner
        ? { ownerReferences: [{ apiVersion: 'x/v1', kind: o.owner, name: 'o', uid: 'o', controller: true }] }
        : {}),
    },
    spec: { containers: [], nodeName: 'node-a' },
  };
}

const KAFKA = { 'strimzi.io/kind': 'Kafka', 'strimzi.io/name': 'my-cluster-kafka' };
const facts = (o: Partial<EvictionFacts> = {}): EvictionFacts => ({
  namespace: 'ns',
  name: 'p-0',
  requestDryRun: false,
  deleteOptionsDryRun: [],
  ...o,
});
const decide = (config: RescheduleConfig, p: Pod, o: Partial<RescheduleInput> = {}) =>
  decideReschedule({
    eviction: facts(),
    pod: { kind: 'found', pod: p },
    records: { kind: 'found', data: undefined },
    config,
    now: NOW,
    ...o,
  });

describe('reschedule profiles: selection', () => {
  it('the Strimzi profile takes Kafka and ZooKeeper pods by a whole-value regex, never an exporter or another kind', () => {
    const s = strimzi();
    assert.ok(profileSelects(s, pod(KAFKA)));
    assert.ok(profileSelects(s, pod({ ...KAFKA, 'strimzi.io/name': 'my-cluster-zookeeper' })));
    assert.ok(!profileSelects(s, pod({ ...KAFKA, 'strimzi.io/name': 'my-kafka-exporter' })), 'regex is anchored');
    assert.ok(!profileSelects(s, pod({ ...KAFKA, 'strimzi.io/name': '-kafka' })), '.+ needs a cluster name');
    assert.ok(!profileSelects(s, pod({ ...KAFKA, 'strimzi.io/kind': 'KafkaConnect' })));
    assert.ok(!profileSelects(s, pod({ 'strimzi.io/kind': 'Kafka' })), 'no name label');
    assert.ok(!profileSelects(strimzi({ drainZooKeeper: false }), pod({ ...KAFKA, 'strimzi.io/name': 'c-zookeeper' })));
    assert.ok(!profileSelects(strimzi({ drainKafka: false }), pod(KAFKA)));
  });

  it('owner kinds narrow a profile to pods whose controller is of one of them', () => {
    const p = profile({ selectors: ['app=db'], ownerKinds: 'StatefulSet,StrimziPodSet' });
    assert.ok(profileSelects(p, pod({ app: 'db' }, { owner: 'StrimziPodSet' })));
    assert.ok(!profileSelects(p, pod({ app: 'db' }, { owner: 'ReplicaSet' })));
    assert.ok(!profileSelects(p, pod({ app: 'db' })), 'no controller');
  });

  it('chooseProfile: the first profile that selects the pod, the rest named for a warning', () => {
    const a = profile({ name: 'a', selectors: ['x=1'] });
    const b = profile({ name: 'b', selectors: ['y=1'] });
    assert.equal(chooseProfile([a, b], pod({ y: '1' }))?.profile, b);
    const both = chooseProfile([a, b], pod({ x: '1', y: '1' }));
    assert.equal(both?.profile, a);
    assert.deepEqual(both?.others, [b]);
    assert.equal(chooseProfile([a, b], pod({ z: '1' })), undefined);
  });
});

describe('reschedule profiles: answers', () => {
  it('the flags profile (no answer, no message) still answers as Couchbase does', () => {
    const d = decide(profile({}), pod({ app: 'couchbase' }), { config: profile({ track: false }) });
    assert.equal(d.answer.status?.code, 429);
    assert.equal(d.answer.status?.message, MESSAGES.annotationAdded);
  });

  it('deny-500 refuses as Strimzi Drain Cleaner does, with its text, after annotating', () => {
    const d = decide(strimzi({ denyCode: 500 }), pod(KAFKA));
    assert.equal(d.outcome, 'reschedule-requested');
    assert.equal(d.answer.allowed, false);
    assert.equal(d.answer.status?.code, 500);
    assert.equal(d.answer.status?.message, STRIMZI_MESSAGE);
    assert.deepEqual(
      d.effects.map((e) => e.kind),
      ['update-records', 'annotate-pod'],
    );
    const annotate = d.effects.find((e) => e.kind === 'annotate-pod');
    assert.deepEqual(annotate?.kind === 'annotate-pod' && annotate.patch.metadata.annotations, {
      'strimzi.io/manual-rolling-update': 'true',
    });
  });

  it('the Strimzi profile refuses with 429 by default (drains wait), keeping its text', () => {
    const asked = decide(strimzi(), pod(KAFKA));
    assert.equal(asked.answer.status?.code, 429);
    assert.equal(asked.answer.status?.message, STRIMZI_MESSAGE);
    const waiting = decide(strimzi(), pod(KAFKA, { annotations: { 'strimzi.io/manual-rolling-update': 'true' } }));
    assert.equal(waiting.outcome, 'waiting');
    assert.equal(waiting.answer.status?.code, 429);
    assert.equal(waiting.answer.status?.message, STRIMZI_MESSAGE);
  });

  it('allow writes the annotation first, then lets the eviction through; a waiting pod is let through too', () => {
    const p = strimzi({ denyEviction: false });
    const d = decide(p, pod(KAFKA));
    assert.equal(d.answer.allowed, true);
    assert.equal(d.effects.at(-1)?.kind, 'annotate-pod', 'the annotation is an effect, done before the answer');
    assert.match(d.answer.warnings?.[0] ?? '', /allowed, the annotation written first/);
    const waiting = decide(p, pod(KAFKA, { annotations: { 'strimzi.io/manual-rolling-update': 'true' } }));
    assert.equal(waiting.answer.allowed, true);
  });

  it('allow still releases a same-name replacement (404) instead of asking its operator to roll it again', () => {
    const old = encodeRecord({
      uid: 'uid-0',
      pod: 'p-0',
      node: 'node-b',
      requestedAt: NOW - 1000,
      refreshedAt: NOW - 1000,
    });
    const d = decide(strimzi({ denyEviction: false }), pod(KAFKA), {
      records: { kind: 'found', data: { [old.key]: old.value } },
      podNode: { kind: 'found', node: { metadata: { name: 'node-a' }, spec: {} } },
    });
    assert.equal(d.outcome, 'replaced');
    assert.equal(d.answer.status?.code, 404);
  });

  it('dry runs change nothing and say what a real eviction would get, per answer', () => {
    const dry = { eviction: facts({ deleteOptionsDryRun: ['All'] }) };
    const five = decide(strimzi({ denyCode: 500 }), pod(KAFKA), dry);
    assert.equal(five.answer.allowed, true);
    assert.deepEqual(five.effects, []);
    assert.match(five.answer.warnings?.join(' ') ?? '', /refused \(500\)/);
    const allow = decide(strimzi({ denyEviction: false }), pod(KAFKA), dry);
    assert.match(allow.answer.warnings?.join(' ') ?? '', /would be allowed and the pod annotated/);
  });

  it('property: whatever the answer mode, an unselected pod is allowed with no effect, and a selected one is annotated before any allow', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<StrimziSettings['denyCode']>(429, 500),
        fc.boolean(),
        fc.constantFrom('my-cluster-kafka', 'c-zookeeper', 'my-kafka-exporter', 'kafka', 'x-kafka-0'),
        fc.boolean(),
        (denyCode, denyEviction, name, annotated) => {
          const p = strimzi({ denyCode, denyEviction });
          const annotations: Record<string, string> = annotated ? { 'strimzi.io/manual-rolling-update': 'true' } : {};
          const target = pod({ ...KAFKA, 'strimzi.io/name': name }, { annotations });
          const d = decide(p, target);
          if (!profileSelects(p, target)) {
            assert.equal(d.outcome, 'not-selected');
            assert.equal(d.answer.allowed, true);
            assert.deepEqual(d.effects, []);
            return;
          }
          const annotates = d.effects.some((e) => e.kind === 'annotate-pod');
          assert.equal(annotates, !annotated, 'annotated exactly when not yet');
          if (denyEviction) assert.equal(d.answer.status?.code, denyCode);
          else assert.equal(d.answer.allowed, true);
        },
      ),
    );
  });
});

describe('reschedule profiles: Strimzi settings', () => {
  it('maps STRIMZI_* onto one profile, and refuses one that would drain nothing', () => {
    const s = strimzi({ namespaces: 'kafka, other' });
    assert.equal(s.name, 'strimzi');
    assert.deepEqual(s.annotation, { key: 'strimzi.io/manual-rolling-update', value: 'true' });
    assert.equal(`${s.annotation.key}=${s.annotation.value}`, STRIMZI_ANNOTATION);
    assert.deepEqual([...(s.namespaces ?? [])], ['kafka', 'other']);
    assert.equal(strimzi({ namespaces: '*' }).namespaces, undefined);
    assert.equal(strimzi({ denyEviction: false }).answer, 'allow');
    assert.equal(strimzi({ denyCode: 500 }).answer, 'deny-500');
    const none = strimziProfileInput({ ...STRIMZI_DEFAULTS, drainKafka: false, drainZooKeeper: false });
    assert.equal(none.ok, false);
    assert.match(none.ok ? '' : none.error, /neither Kafka nor ZooKeeper/);
  });
});

describe('reschedule profiles: the profiles file', () => {
  const GOOD = `
profiles:
- name: kafka
  podSelector: strimzi.io/kind=Kafka
  labelPatterns:
    strimzi.io/name: .+-kafka
  annotation: strimzi.io/manual-rolling-update=true
  answer: deny-500
  message: The pod will be rolled by the Strimzi Cluster Operator
- name: cb
  podSelector: [app=couchbase, app=couchbase-legacy]
  ownerKinds: [CouchbaseCluster]
  annotation: cao.couchbase.com/reschedule=true
  namespaces: db
  track: false
  recordTtl: 30m
`;

  it('reads several profiles', () => {
    const parsed = parseProfilesFile(GOOD);
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.errors.join('\n'));
    const [kafka, cb] = parsed.ok ? parsed.profiles : [];
    assert.equal(kafka?.answer, 'deny-500');
    assert.equal(kafka?.labelPatterns?.[0]?.source, '.+-kafka');
    assert.equal(cb?.selectors.length, 2);
    assert.deepEqual([...(cb?.ownerKinds ?? [])], ['CouchbaseCluster']);
    assert.equal(cb?.track, false);
    assert.equal(cb?.recordTtlMs, 30 * 60_000);
    assert.deepEqual(profilesProblems(parsed.ok ? parsed.profiles : []), []);
  });

  it('bad files: every problem, each naming its profile and field', () => {
    const errors = (text: string) => {
      const parsed = parseProfilesFile(text);
      assert.equal(parsed.ok, false);
      return parsed.ok ? '' : parsed.errors.join('\n');
    };
    assert.match(errors('profiles: [\n'), /^not YAML/);
    assert.match(errors('profile: []'), /non-empty list `profiles`/);
    assert.match(errors('profiles: []'), /non-empty list/);
    const many = errors(`
profiles:
- name: a
  podSelector: app=a
  annotation: x/y=true
  labelPatterns: {app: "(unclosed"}
  answer: deny-503
  podselector: typo
- podSelector: app=b
`);
    assert.match(many, /profile 1 \("a"\): unknown field "podselector"/);
    assert.match(many, /profile 2: name is required/);
    assert.match(many, /profile 2: annotation is required/);
    const invalid = errors(`
profiles:
- name: a
  podSelector: app=a
  annotation: x/y=true
  labelPatterns: {app: "(unclosed"}
  answer: deny-503
`);
    assert.match(invalid, /profile 1 \("a"\): label pattern for app "\(unclosed"/);
    assert.match(invalid, /answer "deny-503": expected one of deny-429, deny-500, allow/);
  });
  it('property: a file written from valid profiles reads back to them; any text is an answer, never a throw', () => {
    const entry = fc.record(
      {
        name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}[a-z0-9]$/),
        podSelector: fc.constantFrom('app=a', 'app in (a,b),tier!=x', '!legacy,app'),
        annotation: fc.constantFrom('example.com/move=true', 'strimzi.io/manual-rolling-update=true'),
        answer: fc.constantFrom('deny-429', 'deny-500', 'allow'),
        namespaces: fc.uniqueArray(fc.constantFrom('a', 'b', 'kafka'), { maxLength: 3 }),
        track: fc.boolean(),
        labelPatterns: fc.dictionary(
          fc.constantFrom('x', 'example.com/y'),
          fc.constantFrom('.+-kafka', 'a|b', '[0-9]+'),
        ),
      },
      { requiredKeys: ['name', 'podSelector', 'annotation'] },
    );
    fc.assert(
      fc.property(fc.array(entry, { minLength: 1, maxLength: 4 }), (entries) => {
        const parsed = parseProfilesFile(toYaml({ profiles: entries }));
        assert.ok(parsed.ok, parsed.ok ? '' : parsed.errors.join('\n'));
        if (!parsed.ok) return;
        entries.forEach((e, i) => {
          const p = parsed.profiles[i]!;
          assert.equal(p.name, e.name);
          assert.equal(`${p.annotation.key}=${p.annotation.value}`, e.annotation);
          assert.equal(p.answer, e.answer);
          assert.equal(p.track, e.track ?? true);
          assert.deepEqual(p.namespaces && [...p.namespaces], e.namespaces?.length ? e.namespaces : undefined);
          assert.deepEqual(Object.fromEntries((p.labelPatterns ?? []).map((x) => [x.key, x.source])), {
            ...e.labelPatterns,
          });
        });
      }),
      { numRuns: 300 },
    );
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.jsonValue().map((v) => toYaml({ profiles: [v] })),
        ),
        (text) => {
          const parsed = parseProfilesFile(text);
          if (!parsed.ok) assert.ok(parsed.errors.length > 0);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('reschedule profiles: overlaps', () => {
  const p = (selector: string, o: RescheduleConfigInput = {}) => profile({ selectors: [selector], ...o });

  it('identical, narrowing and intersecting selectors overlap; separate keys, namespaces, owners or values do not', () => {
    assert.deepEqual(profilesOverlap(p('app=couchbase'), p('app=couchbase')), ['app']);
    assert.ok(profilesOverlap(p('app=couchbase'), p('app=couchbase,tier=data')));
    assert.ok(profilesOverlap(p('app in (a,b)'), p('app in (b,c)')));
    assert.ok(profilesOverlap(p('app'), p('app=x')));
    assert.equal(profilesOverlap(p('app=a'), p('app=b')), undefined);
    assert.equal(profilesOverlap(p('app'), p('!app,x=1')), undefined);
    assert.equal(profilesOverlap(p('app=a'), p('app!=a,app')), undefined);
    assert.equal(profilesOverlap(p('app=couchbase'), strimzi()), undefined, 'no label key in common');
    assert.equal(profilesOverlap(p('app=a', { namespaces: 'x' }), p('app=a', { namespaces: 'y' })), undefined);
    assert.ok(profilesOverlap(p('app=a', { namespaces: 'x,y' }), p('app=a', { namespaces: 'y' })));
    assert.equal(profilesOverlap(p('app=a', { ownerKinds: 'A' }), p('app=a', { ownerKinds: 'B' })), undefined);
    assert.ok(profilesOverlap(p('app=a', { ownerKinds: 'A' }), p('app=a')));
  });

  it('regexes: apart when their literal ends conflict or an in-list decides; anything unproven overlaps', () => {
    const kafka = strimzi({ drainZooKeeper: false });
    const zk = strimzi({ drainKafka: false });
    assert.equal(profilesOverlap(kafka, zk), undefined);
    assert.ok(profilesOverlap(strimzi(), zk), 'kafka|zookeeper includes zookeeper');
    const exporter = p('strimzi.io/kind=Kafka', { labelPatterns: { 'strimzi.io/name': '.+-kafka-exporter' } });
    assert.equal(profilesOverlap(kafka, exporter), undefined, '-kafka vs -exporter suffixes');
    const named = p('strimzi.io/kind=Kafka,strimzi.io/name=my-kafka-exporter');
    assert.equal(profilesOverlap(kafka, named), undefined, 'the in-list value fails the regex');
    assert.ok(profilesOverlap(kafka, p('strimzi.io/kind=Kafka,strimzi.io/name=a-kafka')));
    assert.ok(
      profilesOverlap(kafka, p('strimzi.io/kind', { labelPatterns: { 'strimzi.io/name': 'my-.*' } })),
      'unproven',
    );
    assert.equal(patternsApart('a(b|c)d', 'x.*'), true, 'prefixes a vs x');
    assert.equal(patternsApart('a\\.b', 'a.b'), false);
    assert.equal(patternsApart('ab.*', 'ac'), true, 'prefixes ab vs ac');
    assert.equal(patternsApart('ab+', 'ac+'), false, 'a quantified atom proves nothing (unproven, so overlapping)');
    assert.equal(patternsApart('ab?', 'a'), false);
  });

  it('profilesProblems: overlaps, duplicate names and a shared ConfigMap with two TTLs', () => {
    const problems = profilesProblems([
      p('app=a', { name: 'one' }),
      p('app=a,tier=x', { name: 'one' }),
      p('b=1', { name: 'two', recordTtl: '30m' }),
    ]);
    assert.ok(problems.some((e) => /two profiles are named "one"/.test(e)));
    assert.ok(
      problems.some((e) =>
        /profile "one" \(namespaces: every namespace\) and profile "one" .* overlap: .*label "app"/.test(e),
      ),
    );
    assert.ok(problems.some((e) => /different record TTLs/.test(e)));
    assert.deepEqual(profilesProblems([p('app=a'), strimzi()]), []);
  });

  // A small world of keys, values and regexes, so random profiles meet often.
  const KEYS = ['a', 'b', 'c'];
  const VALUES = ['x', 'y', 'x-kafka', 'y-zookeeper', 'kafka'];
  const requirement = fc.oneof(
    fc.tuple(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES)).map(([k, v]) => `${k}=${v}`),
    fc.tuple(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES)).map(([k, v]) => `${k}!=${v}`),
    fc
      .tuple(fc.constantFrom(...KEYS), fc.uniqueArray(fc.constantFrom(...VALUES), { minLength: 1, maxLength: 3 }))
      .map(([k, vs]) => `${k} in (${vs.join(',')})`),
    fc.constantFrom(...KEYS),
    fc.constantFrom(...KEYS).map((k) => `!${k}`),
  );
  const REGEXES = ['.+-kafka', '.+-zookeeper', 'x.*', '.*', 'kafka|x', '[a-z]+', '(x|y)-.+', 'x-kafka'];
  const arbProfile = fc
    .tuple(
      fc.uniqueArray(requirement, { minLength: 1, maxLength: 3 }),
      fc.option(fc.tuple(fc.constantFrom(...KEYS), fc.constantFrom(...REGEXES)), { nil: undefined }),
    )
    .map(([reqs, pattern]) =>
      profile({ selectors: [reqs.join(',')], ...(pattern ? { labelPatterns: { [pattern[0]]: pattern[1] } } : {}) }),
    );
  const arbLabels = fc.dictionary(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES), { maxKeys: 3 });
  const keysOf = (c: RescheduleConfig) =>
    new Set([
      ...c.selectors.flatMap((s) => s.requirements.map((r) => r.key)),
      ...(c.labelPatterns ?? []).map((x) => x.key),
    ]);

  it('property: never misses an overlap — a pod both select, through a key both constrain, is always reported', () => {
    fc.assert(
      fc.property(arbProfile, arbProfile, arbLabels, (a, b, labels) => {
        const target = pod(labels);
        const sharesKey = [...keysOf(a)].some((k) => keysOf(b).has(k));
        if (sharesKey && profileSelects(a, target) && profileSelects(b, target))
          assert.ok(profilesOverlap(a, b), `both select ${JSON.stringify(labels)}`);
      }),
      { numRuns: 3000 },
    );
  });

  it('property: overlap is symmetric, and a profile that selects anything overlaps itself and its narrowings', () => {
    fc.assert(
      fc.property(arbProfile, arbProfile, requirement, arbLabels, (a, b, extra, labels) => {
        assert.equal(profilesOverlap(a, b) === undefined, profilesOverlap(b, a) === undefined);
        const narrowed = profile({
          selectors: [
            `${a.selectors[0]!.requirements.length > 0 ? `${formatLabelSelector(a.selectors[0]!)},` : ''}${extra}`,
          ],
          ...(a.labelPatterns ? { labelPatterns: { [a.labelPatterns[0]!.key]: a.labelPatterns[0]!.source } } : {}),
        });
        if (profileSelects(narrowed, pod(labels))) {
          assert.ok(profilesOverlap(a, a));
          assert.ok(profilesOverlap(a, narrowed));
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('property: patternsApart is sound — two regexes it calls apart never both match a string', () => {
    const atom = fc.constantFrom('a', 'b', '-', 'ab', '.', '.+', '.*', '[ab]', 'a?', 'b+', '(a|b)', '\\.', 'x{1,2}');
    const regex = fc
      .array(
        fc.array(atom, { minLength: 1, maxLength: 4 }).map((xs) => xs.join('')),
        { minLength: 1, maxLength: 2 },
      )
      .map((alts) => alts.join('|'));
    const text = fc.array(fc.constantFrom('a', 'b', '-', '.', 'x'), { maxLength: 7 }).map((xs) => xs.join(''));
    fc.assert(
      fc.property(regex, regex, text, (r, s, t) => {
        const both = new RegExp(`^(?:${r})$`).test(t) && new RegExp(`^(?:${s})$`).test(t);
        if (both) assert.equal(patternsApart(r, s), false, `${JSON.stringify(t)} matches ${r} and ${s}`);
      }),
      { numRuns: 5000 },
    );
  });
});
