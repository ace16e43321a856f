import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  BodyTooLargeError,
  HANDLER_DEADLINE_MESSAGE,
  MAX_ADMISSION_BODY_BYTES,
  readLimitedBody,
  serveAdmission,
  type AdmissionHandler,
  type AdmissionRequestV1,
} from '../../../src/runtime/admission/admission.ts';
import { recordingLogger } from '../../support/logger.ts';

const never = new AbortController().signal;
const allow: AdmissionHandler = () => ({ allowed: true });

function review(apiVersion = 'admission.k8s.io/v1', request: unknown = baseRequest()): Buffer {
  return Buffer.from(JSON.stringify({ apiVersion, kind: 'AdmissionReview', request }));
}

function baseRequest(overrides: Record<string, unknown> = {}) {
  return {
    uid: 'abc-123',
    kind: { group: 'apps', version: 'v1', kind: 'StatefulSet' },
    resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
    name: 'ingester-zone-a',
    namespace: 'cortex',
    operation: 'UPDATE',
    userInfo: { username: 'alice' },
    ...overrides,
  };
}

function serve(
  body: Buffer | string,
  handler: AdmissionHandler = allow,
  contentType: string | undefined = 'application/json',
  signal = never,
) {
  return serveAdmission({ contentType, body: typeof body === 'string' ? Buffer.from(body) : body, signal }, handler);
}

describe('serveAdmission: bad input', { timeout: 10000 }, () => {
  it('refuses a missing or different content type with 400 "wrong content type"', async () => {
    for (const contentType of [
      undefined,
      '',
      'text/plain',
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/yaml',
    ]) {
      const result = await serveAdmission({ contentType, body: review(), signal: never }, allow);
      assert.equal(result.status, 400, String(contentType));
      assert.equal(result.body, 'wrong content type\n');
      assert.match(result.contentType, /^text\/plain/);
    }
  });

  it('answers 413 for a body over the limit', async () => {
    const result = await serve(Buffer.alloc(MAX_ADMISSION_BODY_BYTES + 1, 0x20));
    assert.equal(result.status, 413);
    assert.match(result.body, /too large/);
  });

  it('answers 400 "Request could not be decoded" for malformed JSON', async () => {
    const result = await serve('{"apiVersion": ');
    assert.equal(result.status, 400);
    assert.match(result.body, /^Request could not be decoded: .+\n$/);
  });

  it('answers 400 for JSON that is not an object, or lacks kind or apiVersion', async () => {
    for (const body of [
      'null',
      '42',
      '"x"',
      '[]',
      '{"apiVersion":"admission.k8s.io/v1"}',
      '{"kind":"AdmissionReview"}',
    ]) {
      const result = await serve(body);
      assert.equal(result.status, 400, body);
      assert.match(result.body, /^Request could not be decoded: /, body);
    }
  });

  it('answers 400 "Unsupported group version kind" with Go\'s GVK wording', async () => {
    const apps = await serve(JSON.stringify({ apiVersion: 'apps/v1', kind: 'Deployment' }));
    assert.equal(apps.status, 400);
    assert.equal(apps.body, 'Unsupported group version kind: apps/v1, Kind=Deployment\n');
    const core = await serve(JSON.stringify({ apiVersion: 'v1', kind: 'Pod' }));
    assert.equal(core.body, 'Unsupported group version kind: /v1, Kind=Pod\n');
    const wrongKind = await serve(
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionRequest', request: baseRequest() }),
    );
    assert.equal(wrongKind.body, 'Unsupported group version kind: admission.k8s.io/v1, Kind=AdmissionRequest\n');
    const v2 = await serve(review('admission.k8s.io/v2'));
    assert.equal(v2.status, 400);
    assert.equal(v2.body, 'Unsupported group version kind: admission.k8s.io/v2, Kind=AdmissionReview\n');
  });

  it('answers 400 for a missing request or request uid, without calling the handler', async () => {
    let called = false;
    const spy: AdmissionHandler = () => {
      called = true;
      return { allowed: true };
    };
    const noRequest = await serve(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }), spy);
    assert.equal(noRequest.status, 400);
    assert.equal(noRequest.body, 'AdmissionReview has no request\n');
    const noUid = await serve(review('admission.k8s.io/v1', baseRequest({ uid: undefined })), spy);
    assert.equal(noUid.status, 400);
    assert.equal(noUid.body, 'AdmissionReview request has no uid\n');
    const emptyUid = await serve(review('admission.k8s.io/v1', baseRequest({ uid: '' })), spy);
    assert.equal(emptyUid.status, 400);
    const numericUid = await serve(review('admission.k8s.io/v1', baseRequest({ uid: 7 })), spy);
    assert.equal(numericUid.status, 400);
    assert.match(numericUid.body, /^Request could not be decoded: request.uid/);
    // A uid is echoed in the answer: a huge one is refused rather than sent back (issue 16: 7 MiB uids).
    assert.equal(
      (await serve(review('admission.k8s.io/v1', baseRequest({ uid: 'u'.repeat(1024) })), () => ({ allowed: true })))
        .status,
      200,
    );
    const hugeUid = await serve(review('admission.k8s.io/v1', baseRequest({ uid: 'u'.repeat(1025) })), spy);
    assert.equal(hugeUid.status, 400);
    assert.equal(hugeUid.body, 'Request could not be decoded: request.uid is longer than 1024 characters\n');
    const badResource = await serve(review('admission.k8s.io/v1', baseRequest({ resource: 'statefulsets' })), spy);
    assert.equal(badResource.status, 400);
    assert.equal(called, false);
  });
});

describe('serveAdmission: round trip', { timeout: 10000 }, () => {
  for (const apiVersion of ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']) {
    it(`keeps ${apiVersion} and echoes the uid`, async () => {
      let seen: AdmissionRequestV1 | undefined;
      const handler: AdmissionHandler = (request) => {
        seen = request;
        return { allowed: false, status: { code: 403, message: 'no' }, warnings: ['careful'] };
      };
      const result = await serve(review(apiVersion), handler);
      assert.equal(result.status, 200);
      assert.equal(result.contentType, 'application/json');
      assert.deepEqual(JSON.parse(result.body), {
        apiVersion,
        kind: 'AdmissionReview',
        response: { uid: 'abc-123', allowed: false, status: { code: 403, message: 'no' }, warnings: ['careful'] },
      });
      assert.equal(seen?.name, 'ingester-zone-a');
      assert.equal(seen?.resource.resource, 'statefulsets');
    });
  }

  it('never lets a handler-supplied uid replace the request uid', async () => {
    const handler = (() => ({ allowed: true, uid: 'forged' })) as unknown as AdmissionHandler;
    const result = await serve(review(), handler);
    assert.equal((JSON.parse(result.body) as { response: { uid: string } }).response.uid, 'abc-123');
  });

  it('fills in a missing resource and operation as Go zero values', async () => {
    let seen: AdmissionRequestV1 | undefined;
    await serve(review('admission.k8s.io/v1', { uid: 'u' }), (request) => {
      seen = request;
      return { allowed: true };
    });
    assert.deepEqual(seen?.resource, { group: '', version: '', resource: '' });
    assert.equal(seen?.operation, '');
  });

  it('logs every decision at debug with the request identity', async () => {
    const { lines, log } = recordingLogger();
    await serveAdmission(
      { contentType: 'application/json', body: review(), signal: never },
      () => ({ allowed: false, status: { message: 'no' } }),
      log,
    );
    const line = lines.find((l) => l.level === 'debug');
    assert.ok(line);
    assert.deepEqual(
      { ...line.fields },
      {
        uid: 'abc-123',
        username: 'alice',
        resource: 'statefulsets',
        name: 'ingester-zone-a',
        namespace: 'cortex',
        operation: 'UPDATE',
        decision: 'denied',
        message: 'no',
      },
    );
  });
});

describe('serveAdmission: handler failures', { timeout: 10000 }, () => {
  it('answers 500 when the handler throws, synchronously or not, and logs it', async () => {
    const { lines, log } = recordingLogger();
    const sync = await serveAdmission(
      { contentType: 'application/json', body: review(), signal: never },
      () => {
        throw new Error('boom');
      },
      log,
    );
    assert.equal(sync.status, 500);
    assert.match(sync.body, /boom/);
    const rejected = await serve(review(), () => Promise.reject(new Error('later boom')));
    assert.equal(rejected.status, 500);
    assert.match(rejected.body, /later boom/);
    assert.ok(lines.some((l) => l.level === 'error' && l.fields.uid === 'abc-123'));
  });

  it('answers 500 when the handler returns no decision', async () => {
    const result = await serve(review(), (() => undefined) as unknown as AdmissionHandler);
    assert.equal(result.status, 500);
  });

  it('answers 500 at the deadline without waiting for a handler that never settles', async () => {
    const controller = new AbortController();
    let handlerSignal: AbortSignal | undefined;
    const pending = serve(
      review(),
      (_request, signal) => {
        handlerSignal = signal;
        controller.abort();
        return new Promise(() => {});
      },
      'application/json',
      controller.signal,
    );
    const result = await pending;
    assert.equal(result.status, 500);
    assert.equal(result.body, `${HANDLER_DEADLINE_MESSAGE}\n`);
    assert.equal(handlerSignal?.aborted, true);
  });

  it('answers 500 without calling the handler when the deadline already passed', async () => {
    let called = false;
    const result = await serve(
      review(),
      () => {
        called = true;
        return { allowed: true };
      },
      'application/json',
      AbortSignal.abort(),
    );
    assert.equal(result.status, 500);
    assert.equal(called, false);
  });
});

describe('readLimitedBody', { timeout: 10000 }, () => {
  it('returns the whole body when it fits', async () => {
    const body = await readLimitedBody(Readable.from([Buffer.from('ab'), 'cd', Buffer.from('ef')]), 6, never);
    assert.equal(body.toString(), 'abcdef');
  });

  it('rejects with BodyTooLargeError and stops reading an endless stream', async () => {
    const chunk = 100;
    let produced = 0;
    const stream = new Readable({
      highWaterMark: 256,
      read() {
        produced += chunk;
        this.push(Buffer.alloc(chunk, 0x61));
      },
    });
    const limit = 1000;
    await assert.rejects(readLimitedBody(stream, limit, never), (error: unknown) => {
      assert.ok(error instanceof BodyTooLargeError);
      assert.equal(error.limit, limit);
      assert.equal(error.received, limit + chunk);
      return true;
    });
    const atRejection = produced;
    for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.ok(stream.isPaused());
    assert.equal(stream.listenerCount('data'), 0);
    // Paused: only the stream's own buffer (highWaterMark) may fill, then reads stop.
    assert.ok(produced <= atRejection + 256 + chunk, `produced ${produced}, at rejection ${atRejection}`);
    assert.ok(produced < limit * 2);
    stream.destroy();
  });

  it('rejects when the signal aborts or the stream fails', async () => {
    const controller = new AbortController();
    const stalled = new Readable({ read() {} });
    const pending = readLimitedBody(stalled, 100, controller.signal);
    stalled.push('partial');
    controller.abort(new Error('client went away'));
    await assert.rejects(pending, /client went away/);
    const broken = new Readable({ read() {} });
    const failing = readLimitedBody(broken, 100, never);
    broken.destroy(new Error('socket reset'));
    await assert.rejects(failing, /socket reset/);
  });
});

describe('serveAdmission: property', { timeout: 10000 }, () => {
  it('never throws and always answers 200, 400, 413 or 500 for any JSON body', async () => {
    const handler: AdmissionHandler = (request) => ({ allowed: request.operation === 'UPDATE' });
    const body = fc.oneof(
      fc.json(),
      fc
        .jsonValue()
        .map((request) => JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request })),
      fc
        .record(
          {
            uid: fc.oneof(fc.string(), fc.jsonValue()),
            operation: fc.jsonValue(),
            resource: fc.jsonValue(),
            name: fc.jsonValue(),
          },
          { requiredKeys: [] },
        )
        .map((request) => JSON.stringify({ apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview', request })),
    );
    await fc.assert(
      fc.asyncProperty(body, async (text) => {
        const result = await serve(text, handler);
        assert.ok([200, 400, 413, 500].includes(result.status), `status ${result.status}`);
        if (result.status === 200) {
          const parsed = JSON.parse(result.body) as { response: { uid: unknown; allowed: unknown } };
          assert.equal(typeof parsed.response.uid, 'string');
          assert.equal(typeof parsed.response.allowed, 'boolean');
        }
      }),
      { numRuns: 500 },
    );
  });
});
