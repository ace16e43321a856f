import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { createServer } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { request } from 'node:https';
import { describe, it } from 'node:test';
import { createClusterPki } from './pki.ts';

describe('cluster PKI', () => {
  it('issues an apiserver certificate for loopback and the in-cluster names, signed by the CA', async () => {
    const pki = await createClusterPki();
    const ca = new X509Certificate(pki.ca.cert);
    const server = new X509Certificate(pki.apiserver.cert);
    assert.equal(ca.ca, true);
    assert.ok(server.checkIssued(ca));
    assert.ok(server.verify(ca.publicKey));
    assert.equal(server.ca, false);
    for (const name of ['DNS:localhost', 'DNS:kubernetes.default.svc', 'IP Address:127.0.0.1'])
      assert.ok(server.subjectAltName?.includes(name), `${name} in ${server.subjectAltName}`);
    assert.ok(server.checkPrivateKey(createPrivateKey(pki.apiserver.key)));
  });

  it('puts the admin in system:masters, the group RBAC makes cluster admin', async () => {
    const pki = await createClusterPki();
    const admin = new X509Certificate(pki.admin.cert);
    assert.match(admin.subject, /O=system:masters/);
    assert.ok(admin.checkIssued(new X509Certificate(pki.ca.cert)));
    assert.ok((admin.keyUsage ?? []).includes('1.3.6.1.5.5.7.3.2'), 'clientAuth extended key usage');
  });

  it('gives a ServiceAccount signing key whose public half verifies its signatures', async () => {
    const pki = await createClusterPki();
    const data = Buffer.from('token');
    const signature = sign('sha256', data, createPrivateKey(pki.serviceAccount.key));
    assert.ok(verify('sha256', data, createPublicKey(pki.serviceAccount.pub), signature));
  });

  it('completes a mutual TLS handshake with the admin certificate', async () => {
    const pki = await createClusterPki();
    const server = createServer(
      {
        cert: pki.apiserver.cert,
        key: pki.apiserver.key,
        ca: pki.ca.cert,
        requestCert: true,
        rejectUnauthorized: true,
      },
      (req, res) => {
        const peer = (req.socket as TLSSocket).getPeerCertificate();
        res.end(peer.subject.CN);
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const body = await new Promise<string>((resolve, reject) => {
        request({ host: '127.0.0.1', port, ca: pki.ca.cert, cert: pki.admin.cert, key: pki.admin.key }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve(text));
        })
          .on('error', reject)
          .end();
      });
      assert.equal(body, 'stateward-admin');
    } finally {
      server.close();
    }
  });
});
