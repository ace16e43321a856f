// Certificates and keys for the local control plane: one CA that signs the
// apiserver's serving certificate and the admin client certificate, plus the
// key pair the apiserver signs ServiceAccount tokens with. ECDSA P-256 keeps
// generation in the milliseconds.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface Pem {
  cert: string;
  key: string;
}

export interface ClusterPki {
  ca: Pem;
  apiserver: Pem;
  admin: Pem;
  /** ServiceAccount token signing key (private) and its public half. */
  serviceAccount: { key: string; pub: string };
}

async function newKeys(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
}

async function privatePem(key: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

async function publicPem(key: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('spki', key), 'PUBLIC KEY');
}

function serial(): string {
  // Positive, non-zero, 16 random bytes: RFC 5280 asks for unique serials.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return Buffer.from(bytes).toString('hex');
}

function validity(days: number): { notBefore: Date; notAfter: Date } {
  // Backdate an hour so small clock differences never make a fresh cert "not yet valid".
  const notBefore = new Date(Date.now() - 3600_000);
  return { notBefore, notAfter: new Date(notBefore.getTime() + days * 86400_000) };
}

export interface CertificateAuthority {
  cert: x509.X509Certificate;
  keys: CryptoKeyPair;
  pem: Pem;
}

export async function createCa(commonName: string, days = 365): Promise<CertificateAuthority> {
  const keys = await newKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${commonName}`,
    ...validity(days),
    keys,
    signingAlgorithm: algorithm,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, keys, pem: { cert: cert.toString('pem'), key: await privatePem(keys.privateKey) } };
}

/** The CA of a running cluster from its PEM files, to issue more certificates (the real node's). */
export async function caFromPem(pem: Pem): Promise<CertificateAuthority> {
  const cert = new x509.X509Certificate(pem.cert);
  const privateKey = await webcrypto.subtle.importKey(
    'pkcs8',
    x509.PemConverter.decodeFirst(pem.key),
    { name: 'ECDSA', namedCurve: 'P-256' },
    true,
    ['sign'],
  );
  const publicKey = await webcrypto.subtle.importKey(
    'spki',
    cert.publicKey.rawData,
    { name: 'ECDSA', namedCurve: 'P-256' },
    true,
    ['verify'],
  );
  return { cert, keys: { privateKey, publicKey }, pem };
}

export interface LeafRequest {
  /** Distinguished name, e.g. "CN=admin, O=system:masters". */
  subject: string;
  usage: 'server' | 'client';
  dnsNames?: string[];
  ipAddresses?: string[];
  days?: number;
}

export async function issue(ca: CertificateAuthority, request: LeafRequest): Promise<Pem> {
  const keys = await newKeys();
  const names: x509.JsonGeneralName[] = [
    ...(request.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(request.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension([
      request.usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth,
    ]),
    await x509.AuthorityKeyIdentifierExtension.create(ca.cert),
  ];
  if (names.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(names));
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: request.subject,
    issuer: ca.cert.subject,
    ...validity(request.days ?? 365),
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: algorithm,
    extensions,
  });
  return { cert: cert.toString('pem'), key: await privatePem(keys.privateKey) };
}

export async function createClusterPki(): Promise<ClusterPki> {
  const ca = await createCa('stateward-local-cluster-ca');
  const apiserver = await issue(ca, {
    subject: 'CN=kube-apiserver',
    usage: 'server',
    dnsNames: [
      'localhost',
      'kubernetes',
      'kubernetes.default',
      'kubernetes.default.svc',
      'kubernetes.default.svc.cluster.local',
    ],
    ipAddresses: ['127.0.0.1', '10.96.0.1'],
  });
  // O=system:masters is the group RBAC's bootstrap policy makes cluster admin.
  const admin = await issue(ca, { subject: 'CN=stateward-admin, O=system:masters', usage: 'client' });
  const saKeys = await newKeys();
  return {
    ca: ca.pem,
    apiserver,
    admin,
    serviceAccount: { key: await privatePem(saKeys.privateKey), pub: await publicPem(saKeys.publicKey) },
  };
}
