// Validation of a serving certificate, its key and (optionally) the CA that
// signed it: the PEMs parse, the key belongs to the certificate, the CA
// issued it, and all of it is valid at `now`. Keys may be RSA (PKCS#1 as
// rollout-operator writes them, or PKCS#8) or EC (SEC1 or PKCS#8).
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';

export type BundleCheck =
  { ok: true; notAfter: number; notBefore: number; dnsNames: string[] } | { ok: false; reason: string };

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function certificate(pem: string, what: string): X509Certificate | string {
  try {
    return new X509Certificate(pem);
  } catch (e) {
    return `${what} does not parse: ${message(e)}`;
  }
}

/** DNS entries of Node's subjectAltName string ("DNS:a, DNS:b, IP Address:…"). */
export function sanDnsNames(cert: X509Certificate): string[] {
  const san = cert.subjectAltName;
  if (!san) return [];
  const names: string[] = [];
  // Node quotes (JSON-style) any entry containing a comma or quote.
  const entry = /(?:^|,\s*)([A-Za-z ]+):("(?:[^"\\]|\\.)*"|[^,]*)/g;
  for (const m of san.matchAll(entry)) {
    if (m[1] !== 'DNS') continue;
    const raw = m[2]!;
    try {
      names.push(raw.startsWith('"') ? (JSON.parse(raw) as string) : raw);
    } catch {
      // An entry Node quoted but JSON cannot read: no usable DNS name.
    }
  }
  return names;
}

/** PEM strings; a Secret's decoded data or a GeneratedCertificate fit as they are. */
export interface BundleInput {
  ca?: string | undefined;
  cert?: string | undefined;
  key?: string | undefined;
}

export function parseBundle({ ca, cert, key }: BundleInput, now: number): BundleCheck {
  if (!cert) return { ok: false, reason: 'no certificate' };
  if (!key) return { ok: false, reason: 'no private key' };

  const leaf = certificate(cert, 'certificate');
  if (typeof leaf === 'string') return { ok: false, reason: leaf };
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (e) {
    return { ok: false, reason: `private key does not parse: ${message(e)}` };
  }
  if (!leaf.checkPrivateKey(privateKey)) return { ok: false, reason: 'private key does not match the certificate' };

  let notBefore = leaf.validFromDate.getTime();
  let notAfter = leaf.validToDate.getTime();
  if (ca) {
    const issuer = certificate(ca, 'CA certificate');
    if (typeof issuer === 'string') return { ok: false, reason: issuer };
    if (!issuer.ca) return { ok: false, reason: 'CA certificate is not a CA' };
    if (!leaf.checkIssued(issuer) || !leaf.verify(issuer.publicKey)) {
      return { ok: false, reason: 'certificate is not signed by the CA' };
    }
    // The chain is only as good as its shorter-lived half.
    notBefore = Math.max(notBefore, issuer.validFromDate.getTime());
    notAfter = Math.min(notAfter, issuer.validToDate.getTime());
  }
  if (now < notBefore) return { ok: false, reason: `not valid before ${new Date(notBefore).toISOString()}` };
  if (now >= notAfter) return { ok: false, reason: `expired at ${new Date(notAfter).toISOString()}` };
  return { ok: true, notBefore, notAfter, dnsNames: sanDnsNames(leaf) };
}
