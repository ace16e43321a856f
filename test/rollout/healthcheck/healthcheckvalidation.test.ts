// /admission/rollout-health-check-validation through the admission server
// code, as the API server calls it: a valid RolloutHealthCheck (rollout-
// operator's shape, or with Stateward's fields) is allowed; an invalid one is
// refused with code 400 and every field problem in the one message.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  HEALTH_CHECK_VALIDATION_PATH,
  healthCheckValidationHandler,
} from '../../../src/rollout/healthcheck/healthcheckvalidation.ts';
import { serveAdmission, type AdmissionResponseV1 } from '../../../src/runtime/admission/admission.ts';

function healthCheck(spec: Record<string, unknown>): Record<string, unknown> {
  return {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'RolloutHealthCheck',
    metadata: { name: 'ingester-health', namespace: 'mimir', generation: 1 },
    spec: {
      selector: { matchLabels: { 'rollout-group': 'ingester' } },
      prometheusURL: 'http://mimir-query-frontend.monitoring:8080/prometheus',
      checks: [
        {
          name: 'write-errors',
          query: 'sum(rate(errors_total{${targetMatchers}}[${range}]))',
          successQuery: '${current} <= bool (${baseline} + 0.01)',
        },
      ],
      ...spec,
    },
  };
}

async function validate(object: unknown, operation = 'CREATE') {
  const request = {
    uid: 'u-1',
    kind: { group: 'rollout-operator.grafana.com', version: 'v1', kind: 'RolloutHealthCheck' },
    resource: { group: 'rollout-operator.grafana.com', version: 'v1', resource: 'rollouthealthchecks' },
    namespace: 'mimir',
    name: 'ingester-health',
    operation,
    object,
  };
  const answer = await serveAdmission(
    {
      contentType: 'application/json',
      body: Buffer.from(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request })),
      signal: AbortSignal.timeout(5_000),
    },
    healthCheckValidationHandler,
  );
  assert.equal(answer.status, 200, answer.body);
  const { response } = JSON.parse(answer.body) as { response: AdmissionResponseV1 };
  assert.equal(response.uid, 'u-1');
  return response.allowed
    ? { allowed: true }
    : { allowed: false, code: response.status?.code, message: response.status?.message };
}

describe(HEALTH_CHECK_VALIDATION_PATH, () => {
  it("allows a valid check, in rollout-operator's shape and with Stateward's fields", async () => {
    assert.deepEqual(await validate(healthCheck({})), { allowed: true });
    assert.deepEqual(await validate(healthCheck({}), 'UPDATE'), { allowed: true });
    assert.deepEqual(
      await validate(
        healthCheck({
          headers: [{ name: 'X-Scope-OrgID', value: 'ops' }],
          bearerTokenSecret: { name: 'mimir-query-token', key: 'token' },
          bakeTime: '5m',
          evaluationInterval: '30s',
        }),
      ),
      { allowed: true },
    );
  });

  it('refuses an invalid check with code 400 and every field error in one message', async () => {
    const answer = await validate(
      healthCheck({
        prometheusURL: 'http://user:secret@prometheus:9090',
        bakeTime: 'soon',
        checks: [
          {
            name: 'write-errors',
            query: 'sum(rate(errors_total{${targetMatchers}}[5m]))',
            successQuery: '${baseline} > 0',
            onNoData: 'Ignore',
          },
        ],
      }),
    );
    assert.equal(answer.allowed, false);
    assert.equal(answer.code, 400);
    const message = answer.message ?? '';
    assert.match(message, /^invalid RolloutHealthCheck: /);
    for (const error of [
      'spec.prometheusURL: must not hold credentials: use basicAuth with a Secret',
      'spec.checks[0].query: must contain ${range}',
      'spec.checks[0].successQuery: must contain ${current}',
      'spec.checks[0].onNoData: must be one of Pause, Warn, Disabled',
      'spec.bakeTime: invalid duration "soon"',
    ])
      assert.ok(message.includes(error), `${error} in ${message}`);
    assert.ok(!message.includes('secret@'), 'the credentials in the URL are not echoed');
  });

  it('refuses an object without a spec, or not an object at all', async () => {
    for (const object of [{ metadata: { name: 'x' } }, null, 'a string', 42]) {
      const answer = await validate(object);
      assert.deepEqual(answer, {
        allowed: false,
        code: 400,
        message: 'invalid RolloutHealthCheck: spec: Required value',
      });
    }
  });
});
