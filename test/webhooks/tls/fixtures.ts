// Certificates with chosen keys and dates, for the TLS tests: what
// generate.ts never produces (RSA, expired, not yet valid, wrong issuer).
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { generateKeyPairSync, webcrypto, type KeyObject } from 'node:crypto';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export type KeyKind = 'ec' | 'rsa';

interface Keys {
  pair: webcrypto.CryptoKeyPair;
  /** PEM of the private key: SEC1 for EC, PKCS#1 for RSA (rollout-operator's format). */
  pem: string;
  signing: { name: string; hash: string; namedCurve?: string };
}

function keys(kind: KeyKind): Keys {
  const { privateKey, publicKey }: { privateKey: KeyObject; publicKey: KeyObject } =
    kind === 'rsa'
      ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const algorithm =
    kind === 'rsa'
      ? { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }
      : { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const importAlg =
    kind === 'rsa' ? { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } : { name: 'ECDSA', namedCurve: 'P-256' };
  return {
    pair: {
      privateKey: privateKey.toCryptoKey(importAlg, true, ['sign']),
      publicKey: publicKey.toCryptoKey(importAlg, true, ['verify']),
    },
    pem: privateKey.export({ type: kind === 'rsa' ? 'pkcs1' : 'sec1', format: 'pem' }) as string,
    signing: algorithm,
  };
}

export interface Window {
  notBefore: number;
  notAfter: number;
}

export interface TestCa {
  cert: x509.X509Certificate;
  keys: Keys;
  pem: string;
}

export async function makeCa(window: Window, kind: KeyKind = 'ec'): Promise<TestCa> {
  const k = keys(kind);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: 'CN=test-ca, O=test',
    notBefore: new Date(window.notBefore),
    notAfter: new Date(window.notAfter),
    keys: k.pair,
    signingAlgorithm: k.signing,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
    ],
  });
  return { cert, keys: k, pem: cert.toString('pem') };
}

export interface TestLeaf {
  ca: string;
  cert: string;
  key: string;
}

export async function makeLeaf(
  ca: TestCa,
  dnsNames: string[],
  window: Window,
  kind: KeyKind = 'ec',
): Promise<TestLeaf> {
  const k = keys(kind);
  const cert = await x509.X509CertificateGenerator.create({
    subject: 'CN=rollout-operator, O=test',
    issuer: ca.cert.subject,
    notBefore: new Date(window.notBefore),
    notAfter: new Date(window.notAfter),
    publicKey: k.pair.publicKey,
    signingKey: ca.keys.pair.privateKey,
    signingAlgorithm: ca.keys.signing,
    extensions: [
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(dnsNames.map((value) => ({ type: 'dns' as const, value }))),
    ],
  });
  return { ca: ca.pem, cert: cert.toString('pem'), key: k.pem };
}

/** A CA and a leaf it signed, both valid over window. */
export async function makeBundle(dnsNames: string[], window: Window, kind: KeyKind = 'ec'): Promise<TestLeaf> {
  return makeLeaf(await makeCa(window, kind), dnsNames, window, kind);
}

export function toSecretData(bundle: { ca?: string; cert?: string; key?: string }): Record<string, string> {
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(bundle)) if (v !== undefined) data[k] = Buffer.from(v).toString('base64');
  return data;
}
