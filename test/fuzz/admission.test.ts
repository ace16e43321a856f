// Fuzzing the admission webhooks: random bytes, random JSON and mutations
// of valid AdmissionReviews (fields dropped or replaced by the wrong type,
// huge strings, deep nesting, unicode, edge numbers, v1 and v1beta1, wrong
// content types, truncated or corrupted JSON) through serveAdmission into
// every handler, and a sample of them over HTTPS through the real server.
//
// Every API call the handlers make fails (a transport error or a 500): the
// input handling is under test, and each webhook's documented answer to a
// failing API is asserted. For every body:
// - the answer comes within the handler deadline, and is a 2xx
//   AdmissionReview or a 4xx text (never a 5xx, never a thrown exception);
// - a denial always says why, bad input is a 400 or an allow with a warning;
// - and the webhook's own rules hold (see each describe).
import assert from 'node:assert/strict';
import { Agent, request as httpsRequest } from 'node:https';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { FakeClock } from '../../src/runtime/clock.ts';
import { nopLogger } from '../../src/runtime/log/logger.ts';
import type { Lease, Pod, StatefulSet } from '../../src/runtime/kube/types.ts';
import { indexByOwnerUid } from '../../src/runtime/informer/store.ts';
import { INDEX } from '../../src/workloads/cache.ts';
import {
  ADMISSION_API_VERSIONS,
  serveAdmission,
  type AdmissionDecision,
  type AdmissionHandler,
  type AdmissionHttpResponse,
  type AdmissionRequestV1,
} from '../../src/runtime/admission/admission.ts';
import { noDownscaleHandler } from '../../src/webhooks/nodownscale.ts';
import { prepareDownscaleHandler } from '../../src/downscale/prepare/handler.ts';
import { endpoints, firstChecks, stsInfo } from '../../src/downscale/prepare/prepareplan.ts';
import { parseZpdb, type ZoneAwarePodDisruptionBudget } from '../../src/drain/zpdb/zpdbresource.ts';
import { zpdbValidationHandler } from '../../src/drain/zpdb/zpdbvalidation.ts';
import { parseHealthCheck } from '../../src/rollout/healthcheck/resource.ts';
import {
  HEALTH_CHECK_VALIDATION_PATH,
  healthCheckValidationHandler,
} from '../../src/rollout/healthcheck/healthcheckvalidation.ts';
import { ZpdbBudgets } from '../../src/drain/zpdb/evictions.ts';
import { parseRescheduleConfig } from '../../src/drain/reschedule/rescheduleconfig.ts';
import { rescheduleHandler } from '../../src/drain/reschedule/webhook.ts';
import { WebhookServer } from '../../src/runtime/admission/webhookserver.ts';
import { generateSelfSigned } from '../../src/webhooks/tls/generate.ts';
import {
  deepMarker,
  failingClient,
  fakeInformer,
  jsonBytes,
  mostly,
  mutated,
  nastyString,
  params,
  settlesWithin,
  textMutationArb,
  weirdValue,
  within,
  type Failure,
  type TextMutation,
  PARSE_BUDGET_MS,
} from './support.ts';
import { NO_DOWNSCALE_LABEL_KEY } from '../../src/vocabulary/keys.ts';
import { assertReachingAsync, SKIP } from '../support/reach.ts';

/** The handlers' deadline here; the server gives them 90 % of -server-tls.request-timeout. */
const DEADLINE_MS = 2_000;
const NS = 'ns';
const failureArb = fc.constantFrom<Failure>('transport', 'server-error');

// ------------------------------------------------------------ plumbing

interface Call {
  request: AdmissionRequestV1;
  decision?: AdmissionDecision;
}

/** Wraps a handler to keep what it was given and what it answered. */
function recorded(handler: AdmissionHandler): { handler: AdmissionHandler; calls: Call[] } {
  const calls: Call[] = [];
  return {
    calls,
    handler: async (request, signal) => {
      const call: Call = { request };
      calls.push(call);
      call.decision = await handler(request, signal);
      return call.decision;
    },
  };
}

async function serve(input: Body, handler: AdmissionHandler): Promise<AdmissionHttpResponse> {
  const answer = serveAdmission(
    { contentType: input.contentType, body: bytesOf(input), signal: AbortSignal.timeout(DEADLINE_MS) },
    handler,
  );
  return settlesWithin(DEADLINE_MS + 500, 'serveAdmission', answer);
}

/** The answer is an AdmissionReview (2xx) or a clear 4xx text; never a 5xx. Returns the response, if any. */
function checkAnswer(answer: AdmissionHttpResponse, calls: Call[]): AdmissionDecision | undefined {
  assert.ok(
    answer.status === 200 || answer.status === 400 || answer.status === 413,
    `status ${answer.status}: ${answer.body.slice(0, 300)}`,
  );
  if (answer.status !== 200) {
    assert.match(answer.contentType, /^text\/plain/);
    assert.ok(
      answer.body.endsWith('\n') && answer.body.trim().length > 0,
      `4xx without a message: ${JSON.stringify(answer.body)}`,
    );
    assert.equal(calls.length, 0, 'a refused request never reaches the handler');
    return undefined;
  }
  assert.equal(answer.contentType, 'application/json');
  assert.equal(calls.length, 1);
  const review = JSON.parse(answer.body) as {
    apiVersion: string;
    kind: string;
    response: AdmissionDecision & { uid: string };
  };
  assert.ok(ADMISSION_API_VERSIONS.includes(review.apiVersion));
  assert.equal(review.kind, 'AdmissionReview');
  assert.equal(review.response.uid, calls[0]!.request.uid);
  assert.equal(typeof review.response.allowed, 'boolean');
  if (!review.response.allowed) {
    const message = review.response.status?.message;
    assert.ok(
      typeof message === 'string' && message.trim() !== '',
      `a denial without a message: ${answer.body.slice(0, 300)}`,
    );
  }
  return calls[0]!.decision;
}

/** A request body: a JSON document (then a byte-level mutation of its text), or raw bytes. Kept as such so counterexamples read well. */
type Body = { contentType: string | undefined } & ({ doc: unknown; text: TextMutation } | { raw: number[] });

function bytesOf(input: Body): Buffer {
  return 'raw' in input ? Buffer.from(input.raw) : jsonBytes(input.doc, input.text);
}

const contentTypeArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/json') },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      undefined,
      '',
      'application/json; charset=utf-8',
      'text/plain',
      'APPLICATION/JSON',
      'application/yaml',
      'application/json\u0000',
    ),
  },
);

/** Bodies for one webhook: mostly mutated valid reviews of `request`, some random JSON, some random bytes. */
function bodies(request: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<Body> {
  const review = fc.record({
    apiVersion: fc.constantFrom(...ADMISSION_API_VERSIONS),
    kind: fc.constant('AdmissionReview'),
    request,
  });
  const doc = fc.oneof(
    { weight: 10, arbitrary: fc.record({ doc: mutated(review), text: textMutationArb }) },
    { weight: 1, arbitrary: fc.record({ doc: fc.jsonValue(), text: fc.constant<TextMutation>({ op: 'none' }) }) },
    { weight: 1, arbitrary: fc.record({ raw: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 200 }) }) },
  );
  return fc.tuple(contentTypeArb, doc).map(([contentType, d]) => ({ contentType, ...d }));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const envelopeFields = {
  uid: fc.oneof({ weight: 5, arbitrary: fc.uuid() }, { weight: 1, arbitrary: nastyString }),
  name: fc.constantFrom('web', 'ingester-zone-a', 'ingester-zone-a-0', ''),
  namespace: fc.constantFrom(NS, 'other', ''),
  userInfo: fc.record({
    username: fc.constantFrom('alice', 'system:serviceaccount:kube-system:replicaset-controller'),
  }),
};

// ------------------------------------------------------- no-downscale

const replicasArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 6 }) },
  { weight: 1, arbitrary: fc.constantFrom<number | null | undefined>(undefined, null, 2 ** 31 - 1) },
);
const noDownscaleLabels = fc.oneof(
  fc.constant({ [NO_DOWNSCALE_LABEL_KEY]: 'true' }),
  fc.constant({}),
  fc.record({ [NO_DOWNSCALE_LABEL_KEY]: fc.constantFrom('false', 'True', ''), app: fc.constant('web') }),
);

function workloadObject(
  kind: string,
  replicas: number | null | undefined,
  labels: Record<string, string>,
): Record<string, unknown> {
  const apiVersion = kind === 'Scale' ? 'autoscaling/v1' : 'apps/v1';
  const spec: Record<string, unknown> = { serviceName: 'web' };
  if (replicas !== undefined) spec.replicas = replicas;
  return { apiVersion, kind, metadata: { name: 'web', namespace: NS, ...(kind === 'Scale' ? {} : { labels }) }, spec };
}

const RESOURCE_OF: Record<string, string> = {
  StatefulSet: 'statefulsets',
  Deployment: 'deployments',
  ReplicaSet: 'replicasets',
};

const noDownscaleRequest: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    ...envelopeFields,
    kind: fc.constantFrom('StatefulSet', 'Deployment', 'ReplicaSet', 'Scale'),
    parent: fc.constantFrom('statefulsets', 'deployments', 'replicasets', 'pods'),
    from: replicasArb,
    to: replicasArb,
    labels: noDownscaleLabels,
    dryRun: fc.boolean(),
  })
  .map(({ kind, parent, from, to, labels, dryRun, ...rest }) => ({
    ...rest,
    kind: { group: kind === 'Scale' ? 'autoscaling' : 'apps', version: 'v1', kind },
    resource: { group: 'apps', version: 'v1', resource: kind === 'Scale' ? parent : RESOURCE_OF[kind] },
    ...(kind === 'Scale' ? { subResource: 'scale' } : {}),
    operation: 'UPDATE',
    oldObject: workloadObject(kind, from, labels),
    object: workloadObject(kind, to, labels),
    dryRun,
  }));

/**
 * The test's reading of a review's replica change: undefined when either
 * object cannot be decoded (checking that the webhook then allowed it with a
 * warning), else the old object's reading and whether it is a downscale.
 */
function replicaChange(
  decision: AdmissionDecision,
  oldObject: unknown,
  object: unknown,
): { before: { kind: string; replicas: number | undefined }; downscale: boolean } | undefined {
  const before = replicasOracle(oldObject);
  const after = replicasOracle(object);
  if (!before || !after) {
    assert.ok(
      decision.allowed && (decision.warnings?.length ?? 0) > 0,
      `undecodable objects: allowed with a warning, got ${JSON.stringify(decision)}`,
    );
    return undefined;
  }
  const downscale = before.replicas !== undefined && after.replicas !== undefined && before.replicas > after.replicas;
  return { before, downscale };
}

/** The test's own reading of an object's replicas: what the webhook can decode, or undefined when it cannot. */
function replicasOracle(obj: unknown): { kind: string; replicas: number | undefined } | undefined {
  if (!isRecord(obj)) return undefined;
  const { apiVersion, kind, spec } = obj;
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return undefined;
  const scale = apiVersion === 'autoscaling/v1' && kind === 'Scale';
  if (!scale && !(apiVersion === 'apps/v1' && ['StatefulSet', 'Deployment', 'ReplicaSet'].includes(kind)))
    return undefined;
  if (spec !== undefined && spec !== null && !isRecord(spec)) return undefined;
  const replicas = spec?.replicas;
  if (replicas === undefined || replicas === null) return { kind, replicas: scale ? 0 : undefined };
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < -(2 ** 31) || replicas > 2 ** 31 - 1)
    return undefined;
  return { kind, replicas };
}

describe('fuzz: /admission/no-downscale', { timeout: 120_000 }, () => {
  it('answers every body in time with a 2xx or 4xx; never allows a labelled downscale; warns on what it cannot decode', async () => {
    await assertReachingAsync(
      fc.tuple(bodies(noDownscaleRequest), failureArb),
      async ([input, failure]) => {
        const { handler, calls } = recorded(
          noDownscaleHandler({
            getParentLabels: () =>
              Promise.reject(new Error(failure === 'transport' ? 'connect ECONNREFUSED' : '500 InternalError')),
          }),
        );
        const decision = checkAnswer(await serve(input, handler), calls);
        if (!decision) return SKIP;
        const { oldObject, object } = calls[0]!.request;
        const change = replicaChange(decision, oldObject, object);
        if (!change) return;
        const { before, downscale } = change;
        const labels =
          isRecord(oldObject) && isRecord(oldObject.metadata) && isRecord(oldObject.metadata.labels)
            ? oldObject.metadata.labels
            : {};
        if (downscale && before.kind !== 'Scale' && labels[NO_DOWNSCALE_LABEL_KEY] === 'true') {
          assert.equal(decision.allowed, false, 'a downscale of a labelled workload is denied');
          assert.equal(decision.warnings, undefined, 'the deny carries no warning');
          assert.match(
            decision.status?.message ?? '',
            /is not allowed because it has the label 'grafana\.com\/no-downscale=true'/,
          );
        } else if (
          downscale &&
          before.kind === 'Scale' &&
          ['statefulsets', 'deployments', 'replicasets'].includes(calls[0]!.request.resource.resource)
        ) {
          // The parent's labels cannot be read: fail closed, and say to retry.
          assert.ok(
            !decision.allowed && /could not be read .*; retry$/.test(decision.status?.message ?? ''),
            JSON.stringify(decision),
          );
        } else if (downscale && before.kind === 'Scale') {
          // A parent kind it cannot resolve: fail open, and say so.
          assert.ok(decision.allowed && (decision.warnings?.length ?? 0) > 0, JSON.stringify(decision));
        } else {
          assert.equal(decision.allowed, true, `only a labelled downscale is denied: ${JSON.stringify(decision)}`);
        }
      },
      { ...params(800, 1), floor: 0.25 },
    );
  });
});

// ---------------------------------------------------- prepare-downscale

const PREPARE = 'grafana.com/prepare-downscale';
const PORT = 'grafana.com/prepare-downscale-http-port';
const PATH = 'grafana.com/prepare-downscale-http-path';

const prepareRequest: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    ...envelopeFields,
    scale: mostly(false, true),
    from: replicasArb,
    to: replicasArb,
    prepare: mostly<string | undefined>('true', 'false', undefined),
    group: fc.constantFrom('ingester', undefined),
    port: mostly<string | undefined>('8080', '', undefined),
    path: mostly<string | undefined>('prepare-shutdown', '/ingester/prepare-shutdown', '', undefined),
    serviceName: mostly('ingester', ''),
    dryRun: mostly<boolean | undefined>(false, true, undefined),
  })
  .map(({ scale, from, to, prepare, group, port, path, serviceName, dryRun, ...rest }) => {
    const sts = (replicas: number | null | undefined) => {
      const spec: Record<string, unknown> = {
        serviceName,
        template: { metadata: { labels: { name: 'ingester-zone-a' } } },
      };
      if (replicas !== undefined) spec.replicas = replicas;
      const labels: Record<string, string> = {};
      if (prepare !== undefined) labels[PREPARE] = prepare;
      if (group !== undefined) labels['rollout-group'] = group;
      const annotations: Record<string, string> = {};
      if (port !== undefined) annotations[PORT] = port;
      if (path !== undefined) annotations[PATH] = path;
      return {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: { name: 'ingester-zone-a', namespace: NS, uid: 'sts-uid', labels, annotations },
        spec,
      };
    };
    const scaleObject = (replicas: number | null | undefined) => ({
      apiVersion: 'autoscaling/v1',
      kind: 'Scale',
      metadata: { name: 'ingester-zone-a', namespace: NS },
      spec: replicas === undefined ? {} : { replicas },
    });
    return {
      ...rest,
      resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
      ...(scale ? { subResource: 'scale' } : {}),
      operation: 'UPDATE',
      oldObject: scale ? scaleObject(from) : sts(from),
      object: scale ? scaleObject(to) : sts(to),
      ...(dryRun === undefined ? {} : { dryRun }),
    };
  });

function stringAt(obj: unknown, ...path: string[]): string | undefined {
  let value: unknown = obj;
  for (const key of path) value = isRecord(value) ? value[key] : undefined;
  return typeof value === 'string' ? value : undefined;
}

describe('fuzz: /admission/prepare-downscale', { timeout: 120_000 }, () => {
  it('answers every body in time with a 2xx or 4xx; never allows a labelled downscale it could not prepare; no side effect on a dry run', async () => {
    await assertReachingAsync(
      fc.tuple(bodies(prepareRequest), failureArb, fc.constantFrom('annotation' as const, 'zone-tracker' as const)),
      async ([input, failure, mode]) => {
        const api = failingClient(failure);
        const { handler, calls } = recorded(
          prepareDownscaleHandler({
            client: api.client,
            clock: new FakeClock(),
            log: nopLogger,
            mode,
            zoneTrackerConfigMap: 'zones',
            clusterDomain: 'cluster.local.',
            podTimeoutMs: 200,
            identity: 'fuzz',
          }),
        );
        const decision = checkAnswer(await serve(input, handler), calls);
        if (!decision) return SKIP;
        const request = calls[0]!.request;
        if (request.dryRun === true) {
          assert.equal(decision.allowed, true);
          assert.deepEqual(api.calls, [], 'a dry run has no side effect');
          return;
        }
        const change = replicaChange(decision, request.oldObject, request.object);
        if (!change) return;
        const { before, downscale } = change;
        const old = request.oldObject;
        const optedIn =
          before.kind === 'StatefulSet' &&
          stringAt(old, 'metadata', 'labels', PREPARE) === 'true' &&
          Boolean(stringAt(old, 'metadata', 'annotations', PORT)) &&
          Boolean(stringAt(old, 'metadata', 'annotations', PATH)) &&
          Boolean(stringAt(old, 'spec', 'serviceName'));
        if (downscale && optedIn) {
          // Every API call fails: the pods cannot be listed nor the downscale recorded.
          assert.equal(decision.allowed, false, `an unprepared downscale must be denied: ${JSON.stringify(decision)}`);
        }
        if (!downscale) assert.equal(decision.allowed, true, 'only a downscale is ever denied');
      },
      { ...params(600, 2), floor: 0.25 },
    );
  });
});

describe('fuzz: prepare-downscale, the pure steps up to the pods to call', { timeout: 120_000 }, () => {
  // Replicas are int32, and a mutating webhook sees the new object before
  // validation (negative counts included): the work must follow the pods
  // that exist, never the replica counts. Ranges stay below ~2^21 here so a
  // failure is a slow call, not a process out of memory.
  const count = fc.oneof(
    fc.integer({ min: 0, max: 12 }),
    fc.integer({ min: 0, max: 2_000_000 }),
    fc.integer({ min: -2_000_000, max: -1 }),
  );
  it('firstChecks → stsInfo → endpoints take time bounded by the pods that exist', () => {
    fc.assert(
      fc.property(count, count, fc.uniqueArray(fc.nat(20), { maxLength: 8 }), (from, to, ordinals) => {
        const sts = (replicas: number) => ({
          apiVersion: 'apps/v1',
          kind: 'StatefulSet',
          metadata: {
            name: 'ingester-zone-a',
            namespace: NS,
            labels: { [PREPARE]: 'true' },
            annotations: { [PORT]: '8080', [PATH]: 'prepare-shutdown' },
          },
          spec: { replicas, serviceName: 'ingester' },
        });
        const request = {
          uid: 'u',
          resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
          name: 'ingester-zone-a',
          namespace: NS,
          operation: 'UPDATE',
          oldObject: sts(from),
          object: sts(to),
        } as AdmissionRequestV1;
        const first = firstChecks(request);
        if (first.kind !== 'resolve-statefulset' || first.source.kind !== 'old-object') return;
        const info = stsInfo(first.source.statefulSet, first.downscale);
        if (info.kind !== 'proceed') return;
        const existingPods = new Set(ordinals.map((i) => `ingester-zone-a-${i}`));
        const out = within(PARSE_BUDGET_MS, `endpoints(${from} → ${to})`, () =>
          endpoints({
            sts: 'ingester-zone-a',
            namespace: NS,
            serviceName: info.info.serviceName,
            port: info.info.port,
            path: info.info.path,
            from,
            to,
            existingPods,
          }),
        );
        // Exactly the pods that exist in the range are called, highest ordinal first.
        const expected = ordinals.filter((i) => i >= to && i < from).sort((a, b) => b - a);
        assert.deepEqual(
          out.call.map((e) => e.index),
          expected,
        );
      }),
      params(600, 8),
    );
  });
});

// ------------------------------------------------------- zpdb-validation

const zpdbRequest: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    ...envelopeFields,
    operation: fc.constantFrom('CREATE', 'UPDATE'),
    spec: fc.record(
      {
        maxUnavailable: fc.oneof(fc.integer({ min: -1, max: 3 }), fc.constant(1.5)),
        maxUnavailablePercentage: fc.integer({ min: -1, max: 101 }),
        selector: fc.oneof(
          fc.constant({ matchLabels: { app: 'ingester' } }),
          fc.constant({ matchLabels: {} }),
          fc.constant({}),
        ),
        podNamePartitionRegex: fc.constantFrom(
          '[a-z\\-]+-zone-[a-z]-([0-9]+)',
          '(ingester)-(\\d+)',
          '',
          '(',
          '(?P<p>[a-z]+)-\\d+',
          '[[:alpha:]]+(x)',
          'no-group',
        ),
        podNameRegexGroup: fc.integer({ min: -1, max: 3 }),
        crossZoneEvictionDelay: fc.constantFrom('20m', '0s', '', '-1m', 'soon'),
      },
      { requiredKeys: ['selector'] },
    ),
  })
  .chain(({ spec, ...rest }) =>
    // The budget itself mutated too, so that mutations land inside the spec.
    mutated(
      fc.constant({
        apiVersion: 'rollout-operator.grafana.com/v1',
        kind: 'ZoneAwarePodDisruptionBudget',
        metadata: { name: 'ingester', namespace: NS },
        spec,
      }),
    ).map((object) => ({
      ...rest,
      resource: { group: 'rollout-operator.grafana.com', version: 'v1', resource: 'zoneawarepoddisruptionbudgets' },
      object,
    })),
  );

describe('fuzz: /admission/zpdb-validation', { timeout: 120_000 }, () => {
  it('answers every body in time with a 2xx or 4xx; allows exactly the budgets parseZpdb accepts, denies the rest with a 400', async () => {
    await assertReachingAsync(
      bodies(zpdbRequest),
      async (input) => {
        const { handler, calls } = recorded(zpdbValidationHandler);
        const decision = checkAnswer(await serve(input, handler), calls);
        if (!decision) return SKIP;
        const parsed = parseZpdb(calls[0]!.request.object);
        assert.equal(decision.allowed, 'config' in parsed, JSON.stringify(decision).slice(0, 500));
        if (!decision.allowed) assert.equal(decision.status?.code, 400);
      },
      { ...params(800, 3), floor: 0.25 },
    );
  });
});

// ------------------------------------------------ rollout-health-check-validation

const healthCheckRequest: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    ...envelopeFields,
    operation: fc.constantFrom('CREATE', 'UPDATE'),
    spec: fc.record(
      {
        selector: fc.constantFrom({ matchLabels: { 'rollout-group': 'ingester' } }, { matchLabels: {} }, {}),
        prometheusURL: fc.constantFrom(
          'http://prometheus:9090',
          'https://mimir/prometheus',
          'ftp://x',
          'http://u:p@x',
          'http://x/?q=1',
          'not a url',
          '',
        ),
        headers: fc.constantFrom(
          [{ name: 'X-Scope-OrgID', value: 'ops' }],
          [{ name: 'X-Scope-OrgID', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }],
          [{ name: 'Host', value: 'x' }],
          [{ name: 'X', value: 'a\r\nb' }],
          [{ name: 'X' }],
          'x',
        ),
        bearerTokenSecret: fc.constantFrom({ name: 's', key: 'k' }, { name: '' }, 'x'),
        basicAuth: fc.constantFrom({ username: { name: 's', key: 'u' }, password: { name: 's', key: 'p' } }, {}),
        tlsConfig: fc.constantFrom({ ca: { secret: { name: 's', key: 'ca' } } }, { ca: {} }, { ca: 'x' }),
        bakeTime: fc.constantFrom('5m', '0s', '-1m', 'soon', 3),
        evaluationInterval: fc.constantFrom('30s', '1ms', '1h'),
        checks: fc.array(
          fc.record(
            {
              name: fc.constantFrom('errors', 'latency', 'Bad Name', ''),
              query: fc.constantFrom(
                'sum(rate(e{${targetMatchers}}[${range}]))',
                'sum(rate(e{${targetMatchers}}[5m]))',
                'up',
                'x'.repeat(17_000),
              ),
              successQuery: fc.constantFrom('${current} <= bool ${baseline}', '${baseline}', '1'),
              currentRange: fc.constantFrom('5m', '0s', 'x'),
              queryRetries: fc.integer({ min: -1, max: 12 }),
              onFailure: fc.constantFrom('Pause', 'Warn', 'Disabled', 'Ignore'),
              noDataPolicy: fc.constantFrom('Warn', 'pause'),
              successThreshold: fc.integer({ min: 0, max: 101 }),
              disabled: fc.constantFrom(true, false, 'yes'),
            },
            { requiredKeys: ['name', 'query', 'successQuery'] },
          ),
          { maxLength: 3 },
        ),
      },
      { requiredKeys: ['selector', 'prometheusURL', 'checks'] },
    ),
  })
  .chain(({ spec, ...rest }) =>
    mutated(
      fc.constant({
        apiVersion: 'rollout-operator.grafana.com/v1',
        kind: 'RolloutHealthCheck',
        metadata: { name: 'ingester-health', namespace: NS },
        spec,
      }),
    ).map((object) => ({
      ...rest,
      resource: { group: 'rollout-operator.grafana.com', version: 'v1', resource: 'rollouthealthchecks' },
      object,
    })),
  );

describe(`fuzz: ${HEALTH_CHECK_VALIDATION_PATH}`, { timeout: 120_000 }, () => {
  it('answers every body in time with a 2xx or 4xx; allows exactly the checks parseHealthCheck accepts, denies the rest with a 400', async () => {
    await assertReachingAsync(
      bodies(healthCheckRequest),
      async (input) => {
        const { handler, calls } = recorded(healthCheckValidationHandler);
        const decision = checkAnswer(await serve(input, handler), calls);
        if (!decision) return SKIP;
        const parsed = parseHealthCheck(calls[0]!.request.object ?? {});
        assert.equal(decision.allowed, 'config' in parsed, JSON.stringify(decision).slice(0, 500));
        if (!decision.allowed) assert.equal(decision.status?.code, 400);
      },
      { ...params(800, 3), floor: 0.25 },
    );
  });
});

// ---------------------------------------------------------- pod-eviction

const evictionRequest: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    ...envelopeFields,
    name: fc.constantFrom('ingester-zone-a-0', 'ingester-zone-b-1', 'loner', 'unknown-0', ''),
    operation: fc.constantFrom('CREATE', 'CREATE', 'CREATE', 'DELETE', 'UPDATE'),
    subResource: fc.constantFrom('eviction', 'eviction', 'eviction', 'status', undefined),
    uidPrecondition: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom<unknown>(undefined, 'uid-ingester-zone-a-0', 'uid-other') },
      { weight: 1, arbitrary: weirdValue },
    ),
    deleteDryRun: fc.constantFrom(undefined, [], ['All']),
    dryRun: fc.constantFrom(false, true, undefined),
  })
  .map(({ name, uidPrecondition, deleteDryRun, subResource, dryRun, ...rest }) => {
    const deleteOptions: Record<string, unknown> = {};
    if (uidPrecondition !== undefined) deleteOptions.preconditions = { uid: uidPrecondition };
    if (deleteDryRun) deleteOptions.dryRun = deleteDryRun;
    return {
      ...rest,
      name,
      resource: { group: '', version: 'v1', resource: 'pods' },
      ...(subResource ? { subResource } : {}),
      ...(dryRun === undefined ? {} : { dryRun }),
      object: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace: NS }, deleteOptions },
    };
  });

function readyPod(name: string, owner: string | undefined, labels: Record<string, string>): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      labels,
      ...(owner
        ? {
            ownerReferences: [
              { apiVersion: 'apps/v1', kind: 'StatefulSet', name: owner, uid: `uid-${owner}`, controller: true },
            ],
          }
        : {}),
    },
    spec: { nodeName: 'node-1', containers: [{ name: 'c' }] },
    status: { phase: 'Running', containerStatuses: [{ name: 'c', ready: true, state: { running: {} } }] },
  } as unknown as Pod;
}

/** Two zones of three ready ingesters under one budget (maxUnavailable 1), and a pod no budget covers. */
function evictionWorld(synced: boolean) {
  const labels = { app: 'ingester' };
  const sets = ['ingester-zone-a', 'ingester-zone-b'].map((name) => ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, namespace: NS, uid: `uid-${name}`, labels },
    spec: {
      replicas: 3,
      selector: { matchLabels: { ...labels, zone: name } },
      template: { metadata: { labels: { ...labels, zone: name } } },
    },
    status: { replicas: 3, readyReplicas: 3, updatedReplicas: 3, availableReplicas: 3 },
  }));
  const pods = [
    ...sets.flatMap((s) =>
      [0, 1, 2].map((i) => readyPod(`${s.metadata.name}-${i}`, s.metadata.name, { ...labels, zone: s.metadata.name })),
    ),
    readyPod('loner', undefined, { app: 'other' }),
  ];
  const zpdb: ZoneAwarePodDisruptionBudget = {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name: 'ingester', namespace: NS, uid: 'uid-zpdb', generation: 1 },
    spec: { maxUnavailable: 1, selector: { matchLabels: labels } },
  };
  const indexers = {
    [INDEX.podsByOwner]: indexByOwnerUid,
    [INDEX.orphanPods]: (p: Pod) => (p.metadata?.ownerReferences?.some((r) => r.controller) ? [] : ['']),
  };
  return {
    pods: [fakeInformer<Pod>(pods, { synced, indexers })],
    statefulSets: [fakeInformer<StatefulSet>(sets, { synced })],
    zpdbs: [fakeInformer<ZoneAwarePodDisruptionBudget>([zpdb], { synced })],
    ledgers: [fakeInformer<Lease>([], { synced })],
  };
}

function evictionDryRunOracle(request: AdmissionRequestV1): boolean {
  const options =
    isRecord(request.object) && isRecord(request.object.deleteOptions) ? request.object.deleteOptions : {};
  return (
    request.dryRun === true || (Array.isArray(options.dryRun) && options.dryRun.some((v) => typeof v === 'string'))
  );
}

function preconditionOracle(request: AdmissionRequestV1): string | undefined {
  const uid = stringAt(request.object, 'deleteOptions', 'preconditions', 'uid');
  return uid === '' ? undefined : uid;
}

describe('fuzz: /admission/pod-eviction', { timeout: 120_000 }, () => {
  it('answers every body in time with a 2xx or 4xx, and never allows while its caches are not synced', async () => {
    await assertReachingAsync(
      fc.tuple(bodies(evictionRequest), failureArb),
      async ([input, failure]) => {
        const budgets = new ZpdbBudgets({
          client: failingClient(failure).client,
          clock: new FakeClock(),
          log: nopLogger,
          registry: new Registry(),
          caches: evictionWorld(false),
        });
        const { handler, calls } = recorded(budgets.handler);
        const decision = checkAnswer(await serve(input, handler), calls);
        if (!decision) return SKIP;
        assert.equal(decision.allowed, false);
        assert.equal(decision.status?.code, 429);
      },
      { ...params(300, 4), floor: 0.25 },
    );
  });

  it('with synced caches and a failing API: an eviction under a budget is allowed only on a dry run or for another incarnation', async () => {
    await assertReachingAsync(
      fc.tuple(bodies(evictionRequest), failureArb),
      async ([input, failure]) => {
        const budgets = new ZpdbBudgets({
          client: failingClient(failure).client,
          clock: new FakeClock(),
          log: nopLogger,
          registry: new Registry(),
          caches: evictionWorld(true),
        });
        const { handler, calls } = recorded(budgets.handler);
        const decision = checkAnswer(await serve(input, handler), calls);
        // Allowed is the exception with the API failing (~2.5% of these bodies): the floor only keeps it from vanishing.
        if (!decision?.allowed) return SKIP;
        const request = calls[0]!.request;
        const wanted = preconditionOracle(request);
        const why =
          request.name === 'loner'
            ? 'no budget covers it'
            : evictionDryRunOracle(request)
              ? 'a dry run'
              : wanted !== undefined && wanted !== `uid-${request.name}`
                ? 'another incarnation'
                : undefined;
        if (why === undefined || request.namespace !== NS)
          assert.fail(
            `allowed without a ledger record: ${JSON.stringify({ ...request, object: '…' })} ${JSON.stringify(decision)}`,
          );
      },
      { ...params(600, 5), floor: 0.01 },
    );
  });
});

// ------------------------------------------------- reschedule-on-eviction

describe('fuzz: /admission/reschedule-on-eviction', { timeout: 120_000 }, () => {
  it('answers every body in time with a 2xx or 4xx; fails closed (429) for every pod it must judge when the API fails', async () => {
    const parsed = parseRescheduleConfig({});
    assert.ok(parsed.ok);
    const pods = [
      readyPod('ingester-zone-a-0', undefined, { app: 'couchbase' }),
      readyPod('loner', undefined, { app: 'other' }),
    ];
    await assertReachingAsync(
      fc.tuple(bodies(evictionRequest), failureArb),
      async ([input, failure]) => {
        const handler0 = rescheduleHandler({
          client: failingClient(failure).client,
          clock: new FakeClock(),
          log: nopLogger,
          registry: new Registry(),
          config: parsed.config,
          pods: [fakeInformer(pods)],
        });
        const { handler, calls } = recorded(handler0);
        const decision = checkAnswer(await serve(input, handler), calls);
        if (!decision) return SKIP;
        const request = calls[0]!.request;
        const object = isRecord(request.object) ? request.object : {};
        const name = request.name || stringAt(object, 'metadata', 'name') || '';
        const namespace = request.namespace || stringAt(object, 'metadata', 'namespace') || '';
        const judged =
          request.operation === 'CREATE' &&
          request.resource.resource === 'pods' &&
          request.subResource === 'eviction' &&
          name !== '' &&
          namespace !== '';
        if (!judged) {
          assert.ok(
            decision.allowed && (decision.warnings?.length ?? 0) > 0,
            `not an eviction: allowed with a warning, got ${JSON.stringify(decision)}`,
          );
          return;
        }
        const cached = namespace === NS && (name === 'ingester-zone-a-0' || name === 'loner');
        const wanted = preconditionOracle(request);
        const allowedBecause =
          cached && name === 'loner'
            ? 'not selected'
            : cached && wanted !== undefined && wanted !== `uid-${name}`
              ? 'another incarnation'
              : undefined;
        if (allowedBecause) assert.equal(decision.allowed, true, allowedBecause);
        else {
          assert.equal(
            decision.allowed,
            false,
            `a selected (or unknown) pod is never let go while the API fails: ${JSON.stringify(decision)}`,
          );
          assert.equal(decision.status?.code, 429, 'a transient failure is a 429 for kubectl drain to retry');
        }
      },
      { ...params(600, 6), floor: 0.25 },
    );
  });
});

// ---------------------------------------------------------- over HTTPS

describe('fuzz: the HTTPS webhook server', { timeout: 120_000 }, () => {
  it('answers any request with a 2xx, or a 4xx text, and keeps serving', async (t) => {
    const tls = await generateSelfSigned({
      org: 'fuzz',
      dnsNames: ['localhost'],
      validityMs: 3_600_000,
      now: Date.now(),
    });
    const server = new WebhookServer({
      port: 0,
      host: '127.0.0.1',
      requestTimeoutMs: 5_000,
      registry: new Registry(),
      tls,
    });
    const parsed = parseRescheduleConfig({});
    assert.ok(parsed.ok);
    const failing = failingClient('transport').client;
    const paths: Record<string, AdmissionHandler> = {
      '/admission/no-downscale': noDownscaleHandler({
        getParentLabels: () => Promise.reject(new Error('connect ECONNREFUSED')),
      }),
      '/admission/prepare-downscale': prepareDownscaleHandler({
        client: failing,
        clock: new FakeClock(),
        log: nopLogger,
        mode: 'annotation',
        zoneTrackerConfigMap: 'zones',
        clusterDomain: 'cluster.local.',
        podTimeoutMs: 200,
        identity: 'fuzz',
      }),
      '/admission/zpdb-validation': zpdbValidationHandler,
      [HEALTH_CHECK_VALIDATION_PATH]: healthCheckValidationHandler,
      '/admission/pod-eviction': new ZpdbBudgets({
        client: failing,
        clock: new FakeClock(),
        log: nopLogger,
        registry: new Registry(),
        caches: evictionWorld(true),
      }).handler,
      '/admission/reschedule-on-eviction': rescheduleHandler({
        client: failing,
        clock: new FakeClock(),
        log: nopLogger,
        registry: new Registry(),
        config: parsed.config,
        pods: [],
      }),
    };
    for (const [path, handler] of Object.entries(paths)) server.handle(path, handler);
    const port = await server.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 4, ca: tls.ca });
    t.after(async () => {
      agent.destroy();
      await server.close(1_000);
    });
    const send = (method: string, path: string, contentType: string | undefined, body: Buffer) =>
      settlesWithin(
        5_000,
        `${method} ${path}`,
        new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
          const headers: Record<string, string | number> = { 'content-length': body.length };
          if (contentType !== undefined) headers['content-type'] = contentType;
          const req = httpsRequest(
            { host: '127.0.0.1', servername: 'localhost', port, path, method, agent, headers },
            (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('end', () =>
                resolve({
                  status: res.statusCode ?? 0,
                  type: String(res.headers['content-type']),
                  body: Buffer.concat(chunks).toString('utf8'),
                }),
              );
            },
          );
          req.on('error', reject);
          req.end(body);
        }),
      );

    const requestArb = fc.record({
      method: fc.constantFrom('POST', 'POST', 'POST', 'PUT', 'GET'),
      path: fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom(...Object.keys(paths)) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            '/',
            '/admission/',
            '/admission/no-downscale/',
            '/admission/no-downscale?x=%zz',
            '/%00',
            '/admission/..%2fno-downscale',
          ),
        },
      ),
      // Header values node's own client refuses to send are left to serveAdmission's property.
      body: fc
        .oneof(bodies(noDownscaleRequest), bodies(evictionRequest), bodies(zpdbRequest), bodies(prepareRequest))
        .filter((b) => b.contentType === undefined || !/[^\t\x20-\x7e]/.test(b.contentType)),
    });
    await fc.assert(
      fc.asyncProperty(requestArb, async ({ method, path, body }) => {
        const answer = await send(method, path, body.contentType, bytesOf(body));
        assert.ok(
          answer.status >= 200 && answer.status < 500,
          `status ${answer.status} for ${method} ${path}: ${answer.body.slice(0, 300)}`,
        );
        if (answer.status >= 400)
          assert.ok(
            answer.type.startsWith('text/plain') && answer.body.trim() !== '',
            `4xx without a text: ${answer.type} ${JSON.stringify(answer.body)}`,
          );
        else assert.equal(answer.type, 'application/json');
      }),
      params(100, 7),
    );
    // Still serving after all that.
    const good = Buffer.from(
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: 'u',
          operation: 'UPDATE',
          resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
        },
      }),
    );
    const ok = await send('POST', '/admission/no-downscale', 'application/json', good);
    assert.equal(ok.status, 200);
  });
});

// ---------------------------------------------------------- regressions
// Each failure the properties above found, as its shrunk counterexample.

describe('fuzz regressions: admission', { timeout: 120_000 }, () => {
  const review = (request: Record<string, unknown>): Body => ({
    contentType: 'application/json',
    doc: { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request },
    text: { op: 'none' },
  });

  /** A ZPDB CREATE by alice, as the apiserver would send it, through zpdb-validation: the decision, checked. */
  async function validateZpdbCreate(
    request: { uid: string; name: string; namespace: string },
    metadata: Record<string, string>,
    spec: Record<string, unknown>,
  ) {
    const body = review({
      ...request,
      userInfo: { username: 'alice' },
      operation: 'CREATE',
      resource: { group: 'rollout-operator.grafana.com', version: 'v1', resource: 'zoneawarepoddisruptionbudgets' },
      object: { apiVersion: 'rollout-operator.grafana.com/v1', kind: 'ZoneAwarePodDisruptionBudget', metadata, spec },
    });
    const { handler, calls } = recorded(zpdbValidationHandler);
    return checkAnswer(await serve(body, handler), calls);
  }

  it('prepare-downscale: a group lock the API cannot take denies the downscale (was: the handler threw, HTTP 500)', async () => {
    const sts = (replicas: number) => ({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {
        name: 'ingester-zone-a',
        namespace: 'ns',
        uid: 'sts-uid',
        labels: { 'grafana.com/prepare-downscale': 'true', 'rollout-group': 'ingester' },
        annotations: {
          'grafana.com/prepare-downscale-http-port': '8080',
          'grafana.com/prepare-downscale-http-path': 'prepare-shutdown',
        },
      },
      spec: { serviceName: 'ingester', template: { metadata: { labels: { name: 'ingester-zone-a' } } }, replicas },
    });
    const body = review({
      uid: '00000000-0000-1000-8000-000000000000',
      name: 'web',
      namespace: 'ns',
      userInfo: { username: 'alice' },
      resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
      operation: 'UPDATE',
      oldObject: sts(2147483647),
      object: sts(0),
      dryRun: false,
    });
    const { handler, calls } = recorded(
      prepareDownscaleHandler({
        client: failingClient('transport').client,
        clock: new FakeClock(),
        log: nopLogger,
        mode: 'annotation',
        zoneTrackerConfigMap: 'zones',
        clusterDomain: 'cluster.local.',
        podTimeoutMs: 200,
        identity: 'fuzz',
      }),
    );
    const decision = checkAnswer(await serve(body, handler), calls);
    assert.equal(decision?.allowed, false);
    assert.match(
      decision?.status?.message ?? '',
      /^downscale of statefulsets\/web in ns from 2147483647 to 0 replicas is not allowed because /,
    );
  });

  it('no-downscale: deeply nested spec.replicas is allowed with a warning (was: JSON.stringify in the error text overflowed, HTTP 500)', async () => {
    const workload = (metadata: unknown, replicas: unknown) => ({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata,
      spec: { serviceName: 'web', replicas },
    });
    const body: Body = {
      contentType: 'application/json',
      doc: {
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: '00000000-0000-1000-8000-000000000000',
          name: 'web',
          namespace: 'ns',
          userInfo: { username: 'alice' },
          kind: { group: 'apps', version: 'v1', kind: 'StatefulSet' },
          resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
          operation: 'UPDATE',
          oldObject: workload(null, 0),
          object: workload(
            { name: 'web', namespace: 'ns', labels: { 'grafana.com/no-downscale': 'false', app: 'web' } },
            deepMarker('array', 10_000),
          ),
          dryRun: false,
        },
        '': deepMarker('array', 100),
      },
      text: { op: 'none' },
    };
    const { handler, calls } = recorded(
      noDownscaleHandler({ getParentLabels: () => Promise.reject(new Error('connect ECONNREFUSED')) }),
    );
    const decision = checkAnswer(await serve(body, handler), calls);
    assert.equal(decision?.allowed, true);
    assert.deepEqual(decision?.warnings, [
      "can't get new replicas, allowing the change, err: StatefulSet spec.replicas is not a 32-bit integer: […]",
    ]);
  });

  it('pod-eviction: a precondition uid that is not a string is no other incarnation; the eviction is judged (was: allowed past the budget)', async () => {
    const body = review({
      uid: '1ns',
      namespace: 'ns',
      userInfo: { username: 'alice' },
      operation: 'CREATE',
      name: 'ingester-zone-a-0',
      resource: { group: '', version: 'v1', resource: 'pods' },
      subResource: 'eviction',
      dryRun: false,
      object: {
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name: 'ingester-zone-a-0', namespace: 'ns' },
        deleteOptions: { preconditions: { uid: [] } },
      },
    });
    const budgets = new ZpdbBudgets({
      client: failingClient('transport').client,
      clock: new FakeClock(),
      log: nopLogger,
      registry: new Registry(),
      caches: evictionWorld(true),
    });
    const { handler, calls } = recorded(budgets.handler);
    const decision = checkAnswer(await serve(body, handler), calls);
    // Judged against the budget: the ledger write fails (the API is down), so retry.
    assert.equal(decision?.allowed, false);
    assert.equal(decision?.status?.code, 429);
  });

  it('prepare-downscale: the pods to call for 0 → -367333 replicas are found in time (was: every ordinal walked, ~60 ms here, out of memory at -2^31)', () => {
    const existingPods = new Set([10, 0, 5, 8, 17, 13, 2].map((i) => `ingester-zone-a-${i}`));
    const out = within(PARSE_BUDGET_MS, 'endpoints', () =>
      endpoints({
        sts: 'ingester-zone-a',
        namespace: 'ns',
        serviceName: 'ingester',
        port: '8080',
        path: 'prepare-shutdown',
        from: 0,
        to: -367333,
        existingPods,
      }),
    );
    assert.deepEqual(out.call, []);
  });

  it('prepare-downscale: int32 extremes (3 → -2^31, 2^31-1 → 0) are found in time too', () => {
    const existingPods = new Set(['ingester-zone-a-0', 'ingester-zone-a-1', 'ingester-zone-a-2']);
    const base = {
      sts: 'ingester-zone-a',
      namespace: 'ns',
      serviceName: 'ingester',
      port: '8080',
      path: 'prepare-shutdown',
      existingPods,
    };
    const down = within(PARSE_BUDGET_MS, 'endpoints', () => endpoints({ ...base, from: 3, to: -(2 ** 31) }));
    assert.deepEqual(
      down.call.map((e) => e.index),
      [2, 1, 0],
    );
    const huge = within(PARSE_BUDGET_MS, 'endpoints', () => endpoints({ ...base, from: 2 ** 31 - 1, to: 0 }));
    assert.deepEqual(
      huge.call.map((e) => e.index),
      [2, 1, 0],
    );
    assert.equal(huge.skipped.length, 100);
  });

  it('zpdb-validation: a deeply nested selector is denied with a 400 (was: stack overflow, HTTP 500)', async () => {
    const decision = await validateZpdbCreate(
      { uid: ' ', name: 'ingester-zone-a-0', namespace: 'ns' },
      { name: 'ingester', namespace: 'ns' },
      {
        maxUnavailablePercentage: 36,
        selector: { matchLabels: deepMarker('array', 100_000) },
        podNamePartitionRegex: '(?P<p>[a-z]+)-\\d+',
        crossZoneEvictionDelay: '',
      },
    );
    assert.equal(decision?.allowed, false);
    assert.equal(decision?.status?.code, 400);
    assert.match(
      decision?.status?.message ?? '',
      /^invalid value: selector is not valid, got \.spec\.selector\.matchLabels accessor error: \[\[\[/,
    );
  });

  it('zpdb-validation: a partition regex too large to compile is denied with a 400 (was: "Regular expression too large" thrown, HTTP 500)', async () => {
    const decision = await validateZpdbCreate(
      { uid: 'e3302647-2467-6158-bba0-c6bb3db10145', name: '', namespace: '' },
      { namespace: 'ns' },
      { maxUnavailable: 1, selector: { matchLabels: {} }, podNamePartitionRegex: 'x'.repeat(1_000_000) },
    );
    assert.equal(decision?.allowed, false);
    assert.equal(decision?.status?.code, 400);
    assert.match(decision?.status?.message ?? '', /^invalid value: regex is not valid, got /);
  });
});
