// Self-signed serving certificates for the admission webhooks
// (-server-tls.self-signed-cert.*): one CA, plus a serving certificate it
// signs, both valid for -server-tls.self-signed-cert.expiration.
//
// rollout-operator uses RSA-4096 for both keys, and writes the key as PKCS#1.
// Stateward generates ECDSA P-256 keys instead, written as PKCS#8: a key pair
// takes milliseconds rather than seconds, and every Kubernetes API server
// accepts ECDSA webhook certificates. Secrets that rollout-operator wrote
// (RSA, PKCS#1) are still valid input to bundle.ts and are reused as they are.
import type * as X509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';

let x509Module: Promise<typeof X509> | undefined;

/**
 * @peculiar/x509 with its reflect-metadata polyfill, loaded on the first
 * certificate this process generates: together they cost ~20 MiB of RSS, and
 * most processes never generate one (webhooks off, or the certificate Secret
 * already there).
 */
function loadX509(): Promise<typeof X509> {
  x509Module ??= (async () => {
    await import('reflect-metadata');
    const x509 = await import('@peculiar/x509');
    x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
    return x509;
  })();
  return x509Module;
}

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** rollout-operator's serving certificate has this CN; kept for drop-in parity. */
export const LEAF_COMMON_NAME = 'rollout-operator';

/**
 * How far notBefore is set back from "now". The API server calling the
 * webhook may run a little behind this replica's clock; without slack a
 * fresh certificate would be "not yet valid" to it for those seconds.
 */
export const NOT_BEFORE_SLACK_MS = 5 * 60_000;

export interface GenerateOptions {
  /** Subject O of both certificates, and the CA's CN (-server-tls.self-signed-cert.org). */
  org: string;
  /** Subject alternative names of the serving certificate. */
  dnsNames: string[];
  /** Lifetime (-server-tls.self-signed-cert.expiration). */
  validityMs: number;
  /** Milliseconds since the epoch. */
  now: number;
}

export interface GeneratedCertificate {
  /** The CA certificate, PEM: what goes into the webhooks' caBundle. */
  ca: string;
  /** The serving certificate, PEM. */
  cert: string;
  /** The serving certificate's private key, PKCS#8 PEM. */
  key: string;
  /** Expiry of both certificates, milliseconds since the epoch (second precision). */
  notAfter: number;
}

function serial(): string {
  // Positive, non-zero, 16 random bytes: RFC 5280 wants unique serials,
  // which rollout-operator's fixed 2022/1024 are not.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return Buffer.from(bytes).toString('hex');
}

/** X.509 times carry whole seconds. */
function seconds(ms: number): Date {
  return new Date(Math.floor(ms / 1000) * 1000);
}

async function newKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
}

export async function generateSelfSigned(options: GenerateOptions): Promise<GeneratedCertificate> {
  const { org, now, validityMs } = options;
  if (!(validityMs > 0)) throw new Error(`certificate validity must be positive, got ${validityMs}ms`);
  const dnsNames = [...new Set(options.dnsNames.filter((n) => n !== ''))];
  const notBefore = seconds(now - NOT_BEFORE_SLACK_MS);
  const notAfter = seconds(now + validityMs);
  const x509 = await loadX509();

  const caKeys = await newKeys();
  const caName: X509.JsonName = [{ CN: [org] }, { O: [org] }];
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: caName,
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: algorithm,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });

  const leafKeys = await newKeys();
  const extensions: X509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
    await x509.AuthorityKeyIdentifierExtension.create(caCert),
  ];
  if (dnsNames.length > 0) {
    extensions.push(
      new x509.SubjectAlternativeNameExtension(dnsNames.map((value) => ({ type: 'dns' as const, value }))),
    );
  }
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: [{ CN: [LEAF_COMMON_NAME] }, { O: [org] }],
    issuer: caCert.subject,
    notBefore,
    notAfter,
    publicKey: leafKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: algorithm,
    extensions,
  });

  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey);
  return {
    ca: caCert.toString('pem') + '\n',
    cert: leaf.toString('pem') + '\n',
    key: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY') + '\n',
    notAfter: notAfter.getTime(),
  };
}

/** The default of -server-tls.self-signed-cert.dns-name. */
export function defaultDnsName(namespace: string): string {
  return `rollout-operator.${namespace}.svc`;
}

/**
 * The names a webhook Service is reached by. rollout-operator puts the one
 * -server-tls.self-signed-cert.dns-name into the certificate, so a Service
 * under another name, or a client using another form of it, fails TLS
 * (grafana/helm-charts#3911). Given `<svc>.<ns>.svc` (or its fully qualified
 * `<svc>.<ns>.svc.<clusterDomain>`), this returns every usual form:
 * `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.<clusterDomain>`.
 * Any other name is returned alone. An empty name means the default,
 * `rollout-operator.<namespace>.svc`.
 */
export function serviceDnsNames(dnsName: string, namespace: string, clusterDomain = 'cluster.local'): string[] {
  const name = (dnsName.trim() === '' ? defaultDnsName(namespace) : dnsName.trim()).replace(/\.$/, '');
  const domain = clusterDomain.trim().replace(/^\.+|\.+$/g, '');
  const match = /^([^.]+)\.([^.]+)\.svc(?:\.(.+))?$/.exec(name);
  if (!match || (match[3] !== undefined && match[3].toLowerCase() !== domain.toLowerCase())) return [name];
  const [, svc, ns] = match as unknown as [string, string, string];
  const names = [svc, `${svc}.${ns}`, `${svc}.${ns}.svc`];
  if (domain !== '') names.push(`${svc}.${ns}.svc.${domain}`);
  return names;
}
