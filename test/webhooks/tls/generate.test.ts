import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  generateSelfSigned,
  serviceDnsNames,
  defaultDnsName,
  NOT_BEFORE_SLACK_MS,
} from '../../../src/webhooks/tls/generate.ts';
import { sanDnsNames } from '../../../src/webhooks/tls/bundle.ts';

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

function handshake(port: number, servername: string, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, servername, ca, path: '/', agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('generateSelfSigned', () => {
  it('issues a serving certificate signed by its CA, with every SAN, serverAuth and the asked validity', async () => {
    const now = Date.now();
    const validityMs = 7 * 86_400_000;
    const dnsNames = serviceDnsNames('webhooks.mimir.svc', 'mimir');
    const out = await generateSelfSigned({ org: 'Acme, Inc.', dnsNames, validityMs, now });

    const ca = new X509Certificate(out.ca);
    const leaf = new X509Certificate(out.cert);
    assert.equal(ca.ca, true);
    assert.equal(leaf.ca, false);
    assert.ok(leaf.checkIssued(ca));
    assert.ok(leaf.verify(ca.publicKey));
    assert.ok(ca.verify(ca.publicKey), 'the CA is self-signed');
    // Node escapes the comma: the org went in as one attribute value, not parsed as a DN.
    assert.deepEqual(ca.subject.split('\n'), ['CN=Acme\\, Inc.', 'O=Acme\\, Inc.']);
    assert.deepEqual(leaf.subject.split('\n'), ['CN=rollout-operator', 'O=Acme\\, Inc.']);
    assert.equal(leaf.issuer, ca.subject);
    assert.deepEqual(sanDnsNames(leaf).sort(), [...dnsNames].sort());
    assert.deepEqual(leaf.keyUsage, [SERVER_AUTH]);

    assert.equal(out.notAfter, leaf.validToDate.getTime());
    assert.ok(Math.abs(out.notAfter - (now + validityMs)) < 1000, 'notAfter = now + validity (second precision)');
    assert.ok(Math.abs(leaf.validFromDate.getTime() - (now - NOT_BEFORE_SLACK_MS)) < 1000);
    assert.equal(ca.validToDate.getTime(), out.notAfter);

    assert.match(out.key, /^-----BEGIN PRIVATE KEY-----\n/);
    const key = createPrivateKey(out.key);
    assert.equal(key.asymmetricKeyType, 'ec');
    assert.ok(leaf.checkPrivateKey(key));
  });

  it('gives every call fresh keys and serials', async () => {
    const a = await generateSelfSigned({ org: 'o', dnsNames: ['a'], validityMs: 60_000, now: Date.now() });
    const b = await generateSelfSigned({ org: 'o', dnsNames: ['a'], validityMs: 60_000, now: Date.now() });
    assert.notEqual(a.key, b.key);
    assert.notEqual(new X509Certificate(a.cert).serialNumber, new X509Certificate(b.cert).serialNumber);
  });

  it('rejects a non-positive validity', async () => {
    await assert.rejects(generateSelfSigned({ org: 'o', dnsNames: ['a'], validityMs: 0, now: Date.now() }), /validity/);
  });

  it('completes a TLS handshake for each DNS name, and fails for a name it lacks', async () => {
    const dnsNames = serviceDnsNames('', 'mimir');
    const out = await generateSelfSigned({ org: 'Grafana Labs', dnsNames, validityMs: 3_600_000, now: Date.now() });
    const server = createServer({ cert: out.cert, key: out.key }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      for (const name of dnsNames) assert.equal(await handshake(port, name, out.ca), 'ok', name);
      await assert.rejects(handshake(port, 'other.mimir.svc', out.ca), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
      const stranger = await generateSelfSigned({ org: 'x', dnsNames, validityMs: 3_600_000, now: Date.now() });
      await assert.rejects(handshake(port, dnsNames[0]!, stranger.ca), /certificate/i);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('serviceDnsNames', () => {
  const table: [string, string, string | undefined, string[]][] = [
    [
      '',
      'mimir',
      undefined,
      [
        'rollout-operator',
        'rollout-operator.mimir',
        'rollout-operator.mimir.svc',
        'rollout-operator.mimir.svc.cluster.local',
      ],
    ],
    [
      'rollout-operator.mimir.svc',
      'mimir',
      undefined,
      [
        'rollout-operator',
        'rollout-operator.mimir',
        'rollout-operator.mimir.svc',
        'rollout-operator.mimir.svc.cluster.local',
      ],
    ],
    ['hooks.loki.svc', 'mimir', undefined, ['hooks', 'hooks.loki', 'hooks.loki.svc', 'hooks.loki.svc.cluster.local']],
    ['hooks.ns.svc', 'ns', 'cluster.local.', ['hooks', 'hooks.ns', 'hooks.ns.svc', 'hooks.ns.svc.cluster.local']],
    ['hooks.ns.svc.', 'ns', undefined, ['hooks', 'hooks.ns', 'hooks.ns.svc', 'hooks.ns.svc.cluster.local']],
    ['hooks.ns.svc', 'ns', 'corp.example', ['hooks', 'hooks.ns', 'hooks.ns.svc', 'hooks.ns.svc.corp.example']],
    [
      'hooks.ns.svc.cluster.local',
      'ns',
      undefined,
      ['hooks', 'hooks.ns', 'hooks.ns.svc', 'hooks.ns.svc.cluster.local'],
    ],
    [
      'hooks.ns.svc.corp.example',
      'ns',
      'corp.example',
      ['hooks', 'hooks.ns', 'hooks.ns.svc', 'hooks.ns.svc.corp.example'],
    ],
    ['hooks.ns.svc', 'ns', '', ['hooks', 'hooks.ns', 'hooks.ns.svc']],
    ['hooks.ns.svc.other.domain', 'ns', undefined, ['hooks.ns.svc.other.domain']],
    ['webhook.example.com', 'ns', undefined, ['webhook.example.com']],
    ['a.b.c.svc', 'ns', undefined, ['a.b.c.svc']],
    ['localhost', 'ns', undefined, ['localhost']],
    ['hooks.ns', 'ns', undefined, ['hooks.ns']],
  ];
  for (const [dnsName, ns, domain, want] of table) {
    it(`${JSON.stringify(dnsName)} in ${ns}${domain === undefined ? '' : ` (domain ${JSON.stringify(domain)})`}`, () => {
      assert.deepEqual(
        domain === undefined ? serviceDnsNames(dnsName, ns) : serviceDnsNames(dnsName, ns, domain),
        want,
      );
    });
  }

  it('defaults the flag like rollout-operator', () => {
    assert.equal(defaultDnsName('mimir'), 'rollout-operator.mimir.svc');
  });
});
