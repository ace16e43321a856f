import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  errorFromResponse,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
  isRetryable,
  KubeApiError,
} from '../../../src/runtime/kube/errors.ts';

const status = (code: number, reason: string, message: string, details: object = {}) =>
  JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message, details });

describe('KubeApiError', () => {
  it('reads code, reason, message and causes from a Status body', () => {
    const error = errorFromResponse(
      'PUT',
      '/apis/apps/v1/namespaces/ns/statefulsets/s',
      422,
      status(422, 'Invalid', 'spec.replicas: Invalid value', {
        causes: [{ field: 'spec.replicas', reason: 'FieldValueInvalid' }],
      }),
      null,
    );
    assert.equal(error.code, 422);
    assert.equal(error.reason, 'Invalid');
    assert.equal(error.statusMessage, 'spec.replicas: Invalid value');
    assert.deepEqual(error.causes, [{ field: 'spec.replicas', reason: 'FieldValueInvalid' }]);
    assert.match(error.message, /^PUT \/apis\/apps\/v1\/namespaces\/ns\/statefulsets\/s: 422 Invalid: /);
  });

  it('takes Retry-After from the header, else from the Status details', () => {
    assert.equal(
      errorFromResponse('POST', '/x', 429, status(429, 'TooManyRequests', 'slow down', { retryAfterSeconds: 3 }), '7')
        .retryAfterSeconds,
      7,
    );
    assert.equal(
      errorFromResponse('POST', '/x', 429, status(429, 'TooManyRequests', 'slow down', { retryAfterSeconds: 3 }), null)
        .retryAfterSeconds,
      3,
    );
    assert.equal(
      errorFromResponse('POST', '/x', 429, '', 'Wed, 21 Oct 2026 07:28:00 GMT').retryAfterSeconds,
      undefined,
    );
  });

  it('survives a body that is not a Status (a proxy page, nothing at all)', () => {
    const html = errorFromResponse('GET', '/x', 502, '<html>bad gateway</html>', null);
    assert.equal(html.reason, 'HTTP502');
    assert.match(html.statusMessage, /bad gateway/);
    assert.equal(errorFromResponse('GET', '/x', 404, '', null).reason, 'NotFound');
  });

  it('classifies errors for callers', () => {
    const of = (code: number, reason: string) => errorFromResponse('GET', '/x', code, status(code, reason, 'm'), null);
    assert.ok(isNotFound(of(404, 'NotFound')));
    assert.ok(isConflict(of(409, 'Conflict')));
    assert.ok(!isConflict(of(409, 'AlreadyExists')));
    assert.ok(isAlreadyExists(of(409, 'AlreadyExists')));
    assert.ok(isGone(of(410, 'Gone')));
    assert.ok(isGone(of(500, 'Expired')), 'an Expired reason counts as gone whatever the code');
    assert.ok(!isNotFound(new Error('404')), 'plain errors are not API errors');
  });

  it('calls retryable what a retry can mend: no answer, 429, 5xx; never a 4xx refusal', () => {
    const of = (code: number, reason: string) => errorFromResponse('GET', '/x', code, status(code, reason, 'm'), null);
    for (const [code, reason] of [
      [429, 'TooManyRequests'],
      [500, 'InternalError'],
      [503, 'ServiceUnavailable'],
      [504, 'Timeout'],
    ] as const)
      assert.ok(isRetryable(of(code, reason)), `${code}`);
    assert.ok(
      isRetryable(new KubeApiError({ code: 0, reason: 'NetworkError', message: 'reset', method: 'POST', path: '/x' })),
    );
    assert.ok(isRetryable(new Error('socket hang up')), 'not from the API client: retried');
    for (const [code, reason] of [
      [400, 'BadRequest'],
      [403, 'Forbidden'],
      [404, 'NotFound'],
      [409, 'AlreadyExists'],
      [422, 'Invalid'],
    ] as const)
      assert.ok(!isRetryable(of(code, reason)), `${code}`);
  });
});
