// A WebhookServer for the server tests: a fresh self-signed certificate, a
// private registry, one route (/admission/test) that allows everything,
// listening on a free loopback port and closed when the test ends.
import type { TestContext } from 'node:test';
import { Registry } from 'prom-client';
import { WebhookServer, type WebhookServerOptions } from '../../../src/runtime/admission/webhookserver.ts';
import { generateSelfSigned } from '../../../src/webhooks/tls/generate.ts';

export async function testWebhookServer(
  t: TestContext,
  options: Omit<Partial<WebhookServerOptions>, 'registry' | 'tls'> & { requestTimeoutMs: number },
) {
  const tls = await generateSelfSigned({ org: 'test', dnsNames: ['localhost'], validityMs: 3600_000, now: Date.now() });
  const registry = new Registry();
  const server = new WebhookServer({ port: 0, host: '127.0.0.1', ...options, registry, tls });
  server.handle('/admission/test', () => ({ allowed: true }));
  const port = await server.listen();
  t.after(() => server.close(100));
  return { port, registry, server };
}
