// The HTTPS webhook server itself, over real TLS: bad input gets a clear
// 4xx, good input reaches the handler, and a new certificate is served
// without a restart.
import assert from 'node:assert/strict';
import { request } from 'node:https';
import { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { WebhookServer } from '../../../src/runtime/admission/webhookserver.ts';
import { MAX_ADMISSION_BODY_BYTES } from '../../../src/runtime/admission/admission.ts';
import { generateSelfSigned } from '../../../src/webhooks/tls/generate.ts';

async function post(
  port: number,
  ca: string,
  path: string,
  body: string | Buffer,
  contentType = 'application/json',
  method = 'POST',
): Promise<{ status: number; body: string; peerSerial: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        servername: 'localhost',
        port,
        path,
        method,
        ca,
        headers: { 'content-type': contentType, 'content-length': Buffer.byteLength(body) },
        agent: false,
      },
      (res) => {
        let text = '';
        const serial = (res.socket as TLSSocket).getPeerCertificate().serialNumber;
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, peerSerial: serial }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const review = JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u-1', operation: 'UPDATE', resource: { group: 'apps', version: 'v1', resource: 'statefulsets' } },
});

describe('webhook HTTPS server', { timeout: 20_000 }, () => {
  it("answers bad input with clear 4xx codes and good input with the handler's decision", async (t) => {
    const tls = await generateSelfSigned({
      org: 'test',
      dnsNames: ['localhost'],
      validityMs: 3600_000,
      now: Date.now(),
    });
    const server = new WebhookServer({
      port: 0,
      host: '127.0.0.1',
      requestTimeoutMs: 10_000,
      registry: new Registry(),
      tls,
    });
    server.handle('/admission/test', () => ({ allowed: true }));
    const port = await server.listen();
    t.after(() => server.close(1000));
    assert.equal((await post(port, tls.ca, '/admission/test', review, 'text/plain')).status, 400);
    assert.equal((await post(port, tls.ca, '/admission/test', '{not json')).status, 400);
    assert.equal((await post(port, tls.ca, '/admission/test', review, 'application/json', 'GET')).status, 405);
    assert.equal((await post(port, tls.ca, '/nope', review)).status, 404);
    assert.equal(
      (await post(port, tls.ca, '/admission/test', Buffer.alloc(MAX_ADMISSION_BODY_BYTES + 10, 32))).status,
      413,
    );
    const ok = await post(port, tls.ca, '/admission/test', review);
    assert.equal(ok.status, 200);
    assert.deepEqual(JSON.parse(ok.body), {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'u-1', allowed: true },
    });
  });

  it('serves a new certificate to new connections after setCertificate, without a restart', async (t) => {
    const first = await generateSelfSigned({
      org: 'test',
      dnsNames: ['localhost'],
      validityMs: 3600_000,
      now: Date.now(),
    });
    const second = await generateSelfSigned({
      org: 'test',
      dnsNames: ['localhost'],
      validityMs: 3600_000,
      now: Date.now(),
    });
    const server = new WebhookServer({
      port: 0,
      host: '127.0.0.1',
      requestTimeoutMs: 10_000,
      registry: new Registry(),
      tls: first,
    });
    server.handle('/admission/test', () => ({ allowed: true }));
    const port = await server.listen();
    t.after(() => server.close(1000));
    assert.equal(
      (await post(port, first.ca, '/admission/test', review)).peerSerial,
      new X509Certificate(first.cert).serialNumber,
    );
    server.setCertificate(second);
    const after = await post(port, `${second.ca}${first.ca}`, '/admission/test', review);
    assert.equal(after.peerSerial, new X509Certificate(second.cert).serialNumber);
  });
});
