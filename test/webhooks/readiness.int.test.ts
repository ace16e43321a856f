// /ready means able to answer (issue 24): a Service puts a replica into its
// endpoints as soon as /ready passes, so from the first 200 the HTTPS
// webhook server must take a TLS connection and answer a review — also while
// the certificate Secret is slow to create, and while two replicas race to
// create it. A webhook of the test's own delays every Secret CREATE in the
// namespace by 3 s, which holds each replica between "caches synced" and
// "HTTPS serving" long enough that a /ready that only watched the caches
// would pass there (it did before this change, and the review was refused).
import assert from 'node:assert/strict';
import { createServer, request } from 'node:https';
import { describe, it, type TestContext } from 'node:test';
import { resources } from '../../src/runtime/kube/types.ts';
import type { WebhookConfiguration } from '../../src/webhooks/cainjection.ts';
import { generateSelfSigned } from '../../src/webhooks/tls/generate.ts';
import { freePorts } from '../cluster/ports.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { testClient } from '../support/rollout-group.ts';
import { listenOn } from '../support/tcp.ts';

const cluster = testCluster();
const SECRET_CREATE_DELAY_MS = 3000;

/** A validating webhook that answers every Secret CREATE in `namespace` after a delay, allowing it. */
async function slowSecretCreation(t: TestContext, namespace: string): Promise<void> {
  const tls = await generateSelfSigned({
    org: 'test',
    dnsNames: ['localhost'],
    validityMs: 3_600_000,
    now: Date.now(),
  });
  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const review = JSON.parse(body) as { apiVersion: string; request: { uid: string } };
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            apiVersion: review.apiVersion,
            kind: 'AdmissionReview',
            response: { uid: review.request.uid, allowed: true },
          }),
        );
      }, SECRET_CREATE_DELAY_MS);
    });
  });
  const port = await listenOn(server);
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const kube = testClient(cluster);
  const name = `slow-secrets-${namespace}`;
  await kube.create<WebhookConfiguration>(resources.validatingWebhookConfigurations, {
    metadata: { name },
    webhooks: [
      {
        name: 'slow-secrets.stateward.dev',
        admissionReviewVersions: ['v1'],
        clientConfig: { url: `https://localhost:${port}/slow`, caBundle: Buffer.from(tls.ca).toString('base64') },
        failurePolicy: 'Fail',
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
        rules: [
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['secrets'], scope: 'Namespaced' },
        ],
        sideEffects: 'None',
        timeoutSeconds: 10,
      },
    ],
  } as unknown as WebhookConfiguration);
  t.after(() => kube.delete(resources.validatingWebhookConfigurations, { name }).catch(() => undefined));
}

/** Polls /ready every 20 ms; returns at its first 200, with the 503 bodies seen before it. */
async function firstReady(operator: OperatorProcess, timeoutMs = 30_000): Promise<string[]> {
  const seen: string[] = [];
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const answer = await operator.get('/ready');
    if (answer?.status === 200) return seen;
    if (answer && !seen.includes(answer.body)) seen.push(answer.body);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`not ready within ${timeoutMs} ms; answers: ${seen.join(' | ')}\n${operator.logs.slice(-2000)}`);
}

/** A no-downscale review straight to the replica's HTTPS port; resolves to the HTTP status, or rejects (e.g. ECONNREFUSED). */
function review(port: number): Promise<number> {
  const body = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'ready-1',
      operation: 'UPDATE',
      resource: { group: 'apps', version: 'v1', resource: 'statefulsets' },
    },
  });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/admission/no-downscale',
        method: 'POST',
        rejectUnauthorized: false,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error('no answer within 5 s')));
    req.end(body);
  });
}

describe('/ready covers the webhook server', { timeout: 120_000 }, () => {
  for (const replicas of [1, 2]) {
    it(`${replicas === 1 ? 'one replica' : 'two replicas racing to create the certificate'}: from the first 200 on /ready, the HTTPS port answers a review`, async (t) => {
      const namespace = await cluster.namespace(t, 'ready');
      await slowSecretCreation(t, namespace);
      const ports = await freePorts(replicas);
      const operators = await Promise.all(
        ports.map(async (port) => {
          const operator = await OperatorProcess.start(cluster, namespace, [
            '-server-tls.enabled',
            `-server-tls.port=${port}`,
            '-webhooks.update-ca-bundle=false',
            '-server-tls.self-signed-cert.dns-name=localhost',
          ]);
          t.after(() => operator.stop());
          return { operator, port };
        }),
      );
      await Promise.all(
        operators.map(async ({ operator, port }) => {
          const before = await firstReady(operator);
          assert.equal(
            await review(port),
            200,
            `the review right after /ready turned 200 (503s before: ${before.join(' | ')})`,
          );
          // The wait was for the webhook server, and /ready said so.
          assert.ok(
            before.some((b) => b.includes('webhooks: the HTTPS server')),
            `503 bodies seen: ${before.join(' | ')}`,
          );
        }),
      );
    });
  }
});
