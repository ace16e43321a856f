// What a request carries (src/runtime/kube/credentials.ts, through
// KubeConfig.applyToHTTPSOptions): TLS options and every kind of
// authentication header, and token and certificate files re-read as they
// rotate.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseKubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { apply, b64, config, failure, kubeconfigFixtures, TestClock, type Pki } from './kubeconfigsupport.ts';

let dir = '';
let pki: Pki;

before(async () => {
  ({ dir, pki } = await kubeconfigFixtures());
});
after(() => rm(dir, { recursive: true, force: true }));

describe('applyToHTTPSOptions', () => {
  it('gives a client certificate, the CA, the server name and no bearer header for certificate users', async () => {
    const kc = parseKubeConfig(
      config(
        { 'client-certificate-data': b64(pki.client.cert), 'client-key-data': b64(pki.client.key) },
        { server: 'https://x', 'certificate-authority-data': b64(pki.ca.cert), 'tls-server-name': 'kubernetes' },
      ),
    );
    kc.confirmUsable();
    const options = await apply(kc);
    assert.equal(String(options.ca), pki.ca.cert);
    assert.equal(String(options.cert), pki.client.cert);
    assert.equal(String(options.key as Buffer), pki.client.key);
    assert.equal(options.servername, 'kubernetes');
    assert.equal(options.rejectUnauthorized, undefined);
    assert.deepEqual(options.headers, {});
  });

  it('reads certificate files relative to the kubeconfig', async () => {
    await writeFile(join(dir, 'ca.crt'), pki.ca.cert);
    await writeFile(join(dir, 'client.crt'), pki.client.cert);
    await writeFile(join(dir, 'client.key'), pki.client.key);
    const kc = parseKubeConfig(
      config(
        { 'client-certificate': 'client.crt', 'client-key': 'client.key' },
        { server: 'https://x', 'certificate-authority': 'ca.crt' },
      ),
      { baseDir: dir },
    );
    kc.confirmUsable();
    const options = await apply(kc);
    assert.equal(String(options.ca), pki.ca.cert);
    assert.equal(String(options.cert), pki.client.cert);
  });

  it('sends a bearer token, basic auth and impersonation headers; skips verification only when asked', async () => {
    assert.deepEqual((await apply(parseKubeConfig(config({ token: 'abc', as: 'bob', 'as-uid': '7' })))).headers, {
      Authorization: 'Bearer abc',
      'Impersonate-User': 'bob',
      'Impersonate-Uid': '7',
    });
    // client-go's transport: a header line per group and per extra value, the extra key percent-encoded.
    const groups = parseKubeConfig(
      config({
        token: 'abc',
        as: 'bob',
        'as-groups': ['devs', 'ops, eu'],
        'as-user-extra': { 'scopes.example.com/Team Name%': ['a', 'b'], reason: ['on call'], none: [] },
      }),
    );
    assert.deepEqual((await apply(groups)).headers, {
      Authorization: 'Bearer abc',
      'Impersonate-User': 'bob',
      'Impersonate-Group': ['devs', 'ops, eu'],
      'Impersonate-Extra-scopes.example.com%2FTeam%20Name%25': ['a', 'b'],
      'Impersonate-Extra-reason': ['on call'],
    });
    assert.deepEqual((await apply(parseKubeConfig(config({ username: 'admin', password: 'pw' })))).headers, {
      Authorization: `Basic ${b64('admin:pw')}`,
    });
    const insecure = await apply(
      parseKubeConfig(config({}, { server: 'https://x', 'insecure-skip-tls-verify': true })),
    );
    assert.equal(insecure.rejectUnauthorized, false);
    assert.deepEqual(insecure.headers, {});
  });

  it('names a certificate or key that TLS cannot use, and never quotes it', async () => {
    const badCa = parseKubeConfig(
      config({ token: 't' }, { server: 'https://x', 'certificate-authority-data': b64('not a certificate') }),
    );
    assert.match(await failure(() => apply(badCa)), /^cluster "c": the certificate authority is not usable/);
    const mismatched = parseKubeConfig(
      config({ 'client-certificate-data': b64(pki.client.cert), 'client-key-data': b64(pki.other.key) }),
    );
    const message = await failure(() => apply(mismatched));
    assert.match(message, /^user "u": the client certificate and key are not usable/);
    assert.ok(!message.includes('PRIVATE KEY'));
  });
});

describe('token files', () => {
  it("re-reads a rotated token after 50 s (client-go's period), at once after a 401, and keeps the last one while the file is unreadable", async () => {
    const clock = new TestClock();
    const token = join(dir, 'rotating-token');
    await writeFile(token, 'first\n');
    const kc = parseKubeConfig(config({ tokenFile: token }), { clock });
    kc.confirmUsable();
    const bearer = async () => (await apply(kc)).headers['Authorization'];
    assert.equal(await bearer(), 'Bearer first');
    await writeFile(token, 'second');
    clock.advance(49_000);
    assert.equal(await bearer(), 'Bearer first', 'cached within the period');
    clock.advance(2_000);
    assert.equal(await bearer(), 'Bearer second', 'rotated token picked up');
    await rm(token);
    clock.advance(60_000);
    assert.equal(await bearer(), 'Bearer second', 'an unreadable file keeps the last token');
    await writeFile(token, 'third');
    assert.equal(await bearer(), 'Bearer third', 'after a failed read the next request reads again');
    await writeFile(token, 'fourth');
    kc.credentialsRejected('Bearer stale');
    assert.equal(await bearer(), 'Bearer third', 'a 401 for another token changes nothing');
    kc.credentialsRejected('Bearer third');
    assert.equal(await bearer(), 'Bearer fourth', 'a 401 for the current token re-reads the file');
  });

  it('re-reads rotated certificate files every minute; a pair caught mid-rotation is read again at the next request', async () => {
    const clock = new TestClock();
    const sub = await mkdtemp(join(dir, 'rotate-'));
    await writeFile(join(sub, 'c.crt'), pki.client.cert);
    await writeFile(join(sub, 'c.key'), pki.client.key);
    const kc = parseKubeConfig(config({ 'client-certificate': 'c.crt', 'client-key': 'c.key' }), {
      baseDir: sub,
      clock,
    });
    assert.equal(String((await apply(kc)).cert as Buffer), pki.client.cert);
    await writeFile(join(sub, 'c.crt'), pki.other.cert);
    clock.advance(30_000);
    assert.equal(String((await apply(kc)).cert as Buffer), pki.client.cert, 'cached within the minute');
    clock.advance(31_000);
    assert.match(await failure(() => apply(kc)), /^user "u": the client certificate and key are not usable/);
    await writeFile(join(sub, 'c.key'), pki.other.key);
    const options = await apply(kc);
    assert.equal(String(options.cert as Buffer), pki.other.cert);
    assert.equal(String(options.key as Buffer), pki.other.key);
  });

  it('an empty token file is an error, unless a token is given too', async () => {
    const token = join(dir, 'empty-token');
    await writeFile(token, '  \n');
    assert.match(
      await failure(() => parseKubeConfig(config({ tokenFile: token })).confirmUsable()),
      /tokenFile .* is empty/,
    );
    assert.equal(
      (await apply(parseKubeConfig(config({ tokenFile: token, token: 'fallback' })))).headers['Authorization'],
      'Bearer fallback',
    );
  });
});
