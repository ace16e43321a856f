// The oidc auth-provider as client-go runs it: the id-token sent while good,
// refreshed with the refresh-token at the token endpoint OpenID discovery
// names once it expires (or after a 401), one refresh for concurrent
// requests, every failure a one-line KubeConfigError without secrets.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { parseKubeConfig, type KubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { KubeConfigError } from '../../../src/runtime/kube/kubeconfigfile.ts';

const NOW = Date.parse('2030-01-01T00:00:00Z');

/** An unsigned JWT with this exp (seconds): the client reads exp only, the API server verifies. */
function jwt(exp: number, sub = 'alice'): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'RS256' })}.${part({ sub, exp })}.c2ln`;
}

interface Issuer {
  url: string;
  refreshes: { authorization: string | undefined; body: string }[];
  answer: { status: number; body: unknown };
}

async function issuer(t: { after(fn: () => Promise<void>): void }): Promise<Issuer> {
  const state: Issuer = { url: '', refreshes: [], answer: { status: 200, body: {} } };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let body = '';
    request.on('data', (c: Buffer) => (body += c.toString()));
    request.on('end', () => {
      if (request.url === '/realm/.well-known/openid-configuration') {
        response.end(JSON.stringify({ issuer: `${state.url}/realm`, token_endpoint: `${state.url}/token` }));
        return;
      }
      if (request.url === '/token' && request.method === 'POST') {
        state.refreshes.push({ authorization: request.headers.authorization, body });
        response.writeHead(state.answer.status, { 'content-type': 'application/json' });
        response.end(JSON.stringify(state.answer.body));
        return;
      }
      response.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.after(() => new Promise((resolve) => server.close(() => resolve())));
  return state;
}

function kubeconfig(config: Record<string, string>, clock: { now(): number; monotonic(): number }): KubeConfig {
  return parseKubeConfig(
    stringify({
      clusters: [{ name: 'c', cluster: { server: 'https://10.0.0.1:6443' } }],
      users: [{ name: 'u', user: { 'auth-provider': { name: 'oidc', config } } }],
      contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'ctx',
    }),
    { clock },
  );
}

async function authorization(kc: KubeConfig): Promise<string> {
  const options: HttpsRequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  return String((options.headers as Record<string, string>)['Authorization']);
}

describe('oidc auth-provider', () => {
  it('sends the id-token while it is good, refreshes it at the issuer when it expires or is refused', async (t) => {
    const idp = await issuer(t);
    let now = NOW;
    const clock = { now: () => now, monotonic: () => now };
    const first = jwt(NOW / 1000 + 60);
    const kc = kubeconfig(
      {
        'client-id': 'kube',
        'client-secret': 's3cret',
        'id-token': first,
        'refresh-token': 'r1',
        'idp-issuer-url': `${idp.url}/realm/`,
      },
      clock,
    );
    kc.confirmUsable();
    assert.equal(await authorization(kc), `Bearer ${first}`);
    assert.equal(idp.refreshes.length, 0, 'a good id-token needs no issuer');

    // Within 10 s of exp: refreshed, once for concurrent requests; the rotated refresh-token is kept.
    now = NOW + 51_000;
    const second = jwt(NOW / 1000 + 3600);
    idp.answer = { status: 200, body: { id_token: second, refresh_token: 'r2', access_token: 'ignored' } };
    const sent = await Promise.all([authorization(kc), authorization(kc), authorization(kc)]);
    assert.deepEqual(sent, [`Bearer ${second}`, `Bearer ${second}`, `Bearer ${second}`]);
    assert.equal(idp.refreshes.length, 1);
    assert.equal(idp.refreshes[0]!.authorization, `Basic ${Buffer.from('kube:s3cret').toString('base64')}`);
    assert.deepEqual(Object.fromEntries(new URLSearchParams(idp.refreshes[0]!.body)), {
      grant_type: 'refresh_token',
      refresh_token: 'r1',
    });

    // A 401 to that token: the next request refreshes with the rotated refresh-token.
    const third = jwt(NOW / 1000 + 7200);
    idp.answer = { status: 200, body: { id_token: third } };
    kc.credentialsRejected(`Bearer ${second}`);
    assert.equal(await authorization(kc), `Bearer ${third}`);
    assert.equal(new URLSearchParams(idp.refreshes[1]!.body).get('refresh_token'), 'r2');
  });

  it('fails in one line, naming the user and the issuer, never the tokens', async (t) => {
    const idp = await issuer(t);
    const clock = { now: () => NOW, monotonic: () => NOW };
    const expired = jwt(NOW / 1000 - 1);
    const base = { 'client-id': 'kube', 'id-token': expired, 'idp-issuer-url': `${idp.url}/realm` };
    const failure = async (kc: KubeConfig) => {
      const error = await authorization(kc).then(
        () => assert.fail('expected a failure'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof KubeConfigError, String(error));
      assert.doesNotMatch(error.message, /\n|r-secret|s3cret/);
      return error.message;
    };
    assert.equal(
      await failure(kubeconfig(base, clock)),
      'user "u": oidc: no valid id-token, and cannot refresh without refresh-token',
    );
    idp.answer = { status: 400, body: { error: 'invalid_grant', error_description: 'r-secret is revoked' } };
    assert.equal(
      await failure(kubeconfig({ ...base, 'refresh-token': 'r-secret' }, clock)),
      `user "u": oidc: refreshing the id-token at ${idp.url}/token failed: ${idp.url}/token answered 400: invalid_grant`,
    );
    idp.answer = { status: 200, body: { access_token: 'only' } };
    assert.match(await failure(kubeconfig({ ...base, 'refresh-token': 'r' }, clock)), /the answer has no id_token$/);
    assert.match(
      await failure(kubeconfig({ ...base, 'refresh-token': 'r', 'idp-issuer-url': `${idp.url}/nowhere` }, clock)),
      /^user "u": oidc: OpenID discovery at http:\/\/127\.0\.0\.1:\d+\/nowhere failed: .* answered 404$/,
    );
    assert.throws(
      () => kubeconfig({ 'client-id': 'kube' }, clock).confirmUsable(),
      /^KubeConfigError: user "u": the oidc auth-provider needs idp-issuer-url$/,
    );
  });
});
