// What the kubeconfig tests share (kubeconfigfile, kubeconfigvalidation,
// credentials, execplugin and kubeconfig .test.ts, each going through the
// KubeConfig a client is given): a one-context kubeconfig as YAML, the
// request options it fills in, its one-line errors, a clock the test moves,
// and a temporary directory with a CA and certificates issued by it.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { KubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { KubeConfigError } from '../../../src/runtime/kube/kubeconfigfile.ts';
import { createCa, issue, type Pem } from '../../cluster/pki.ts';

export const b64 = (text: string) => Buffer.from(text).toString('base64');

/** A kubeconfig with one cluster, one user and one context, as YAML. */
export function config(
  user: Record<string, unknown>,
  cluster: Record<string, unknown> = { server: 'https://10.0.0.1:6443' },
  extra: Record<string, unknown> = {},
): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u', namespace: 'ns' } }],
    'current-context': 'ctx',
    ...extra,
  });
}

export async function apply(kc: KubeConfig): Promise<HttpsRequestOptions & { headers: Record<string, string> }> {
  const options: HttpsRequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  return options as HttpsRequestOptions & { headers: Record<string, string> };
}

/** The error `f` throws (or rejects with), asserted to be a one-line KubeConfigError. */
export async function failure(f: () => unknown): Promise<string> {
  try {
    await f();
  } catch (error) {
    assert.ok(error instanceof KubeConfigError, `a KubeConfigError, not ${String(error)}`);
    assert.doesNotMatch(error.message, /\n/, 'one line');
    return error.message;
  }
  assert.fail('expected a KubeConfigError');
}

/** A clock the test moves: wall and monotonic readings advance together. */
export class TestClock {
  wall = Date.parse('2030-01-01T00:00:00Z');
  mono = 1_000;
  now = () => this.wall;
  monotonic = () => this.mono;
  advance(ms: number): void {
    this.wall += ms;
    this.mono += ms;
  }
}

export interface Pki {
  ca: Pem;
  client: Pem;
  server: Pem;
  other: Pem;
}

/** A new temporary directory (the caller removes it) and a CA with a client, a server and a second client certificate. */
export async function kubeconfigFixtures(): Promise<{ dir: string; pki: Pki }> {
  const dir = await mkdtemp(join(tmpdir(), 'stateward-kubeconfig-'));
  const ca = await createCa('kubeconfig-test-ca');
  const pki = {
    ca: ca.pem,
    client: await issue(ca, { subject: 'CN=alice, O=team', usage: 'client' }),
    server: await issue(ca, { subject: 'CN=apiserver', usage: 'server', ipAddresses: ['127.0.0.1'] }),
    other: await issue(ca, { subject: 'CN=exec-user', usage: 'client' }),
  };
  return { dir, pki };
}
