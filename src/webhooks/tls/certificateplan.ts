// What to do with the self-signed certificate Secret, decided from what the
// API returned: pure, so every branch is a unit test.
//
// rollout-operator (pkg/tlscert) reuses a valid Secret, regenerates an empty
// or expired one, creates a missing one, and exits fatally ("delete the
// secret and try again") when keys are missing or the pair does not parse.
// Stateward regenerates in those fatal cases too, with a warning: the Secret
// holds nothing but this operator's own throwaway certificate, so replacing
// it loses nothing, while a crash loop takes the webhooks down until a human
// steps in. It also regenerates ahead of expiry (renewBeforeMs) and when the
// certificate lacks a DNS name the flags now ask for.
import { parseBundle } from './bundle.ts';

/** The Secret's data keys, as rollout-operator names them (not tls.crt/tls.key). */
export const SECRET_KEYS = ['ca', 'cert', 'key'] as const;

const DAY_MS = 86_400_000;

/**
 * Default lead time for renewal: a third of the validity, at most 30 days.
 * With the default 1y expiration that is 30 days, time enough for a
 * renewal failure to be noticed and fixed; short validities (tests, demos)
 * still renew well before expiry and never renew immediately.
 */
export function defaultRenewBefore(validityMs: number): number {
  return Math.min(Math.floor(validityMs / 3), 30 * DAY_MS);
}

export interface SecretState {
  /** Values base64-encoded, as in the API. */
  data?: Record<string, string> | null;
}

export interface PlanInput {
  /** undefined when the Secret does not exist. */
  secret: SecretState | undefined;
  now: number;
  renewBeforeMs: number;
  /** Every one of these must be a DNS SAN of the certificate. */
  wantDnsNames: string[];
}

export interface ReusableBundle {
  ca: string;
  cert: string;
  key: string;
  notBefore: number;
  notAfter: number;
  dnsNames: string[];
}

export type CertificatePlan =
  | { action: 'create' }
  | { action: 'generate-and-update'; reason: string; warning?: string }
  | { action: 'reuse'; bundle: ReusableBundle; renewAt: number };

function decode(value: string | undefined): string | undefined {
  return value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');
}

export function planCertificate(input: PlanInput): CertificatePlan {
  const { secret, now, renewBeforeMs, wantDnsNames } = input;
  if (secret === undefined) return { action: 'create' };
  const data = secret.data ?? {};
  if (Object.keys(data).length === 0) return { action: 'generate-and-update', reason: 'the secret is empty' };

  const missing = SECRET_KEYS.filter((k) => !data[k]);
  if (missing.length > 0) {
    const reason = `the secret lacks ${missing.join(', ')}`;
    return { action: 'generate-and-update', reason, warning: `${reason}; replacing it with a new certificate` };
  }
  const ca = decode(data.ca)!;
  const cert = decode(data.cert)!;
  const key = decode(data.key)!;
  const check = parseBundle({ ca, cert, key }, now);
  if (!check.ok) {
    // Expired and not-yet-valid certificates are routine; anything else
    // means the Secret was damaged, which deserves a warning.
    const routine = /^(expired at|not valid before)/.test(check.reason);
    const reason = `the stored certificate is unusable: ${check.reason}`;
    return routine
      ? { action: 'generate-and-update', reason }
      : { action: 'generate-and-update', reason, warning: `${reason}; replacing it with a new certificate` };
  }

  const have = new Set(check.dnsNames.map((n) => n.toLowerCase()));
  const lacking = wantDnsNames.filter((n) => !have.has(n.toLowerCase()));
  if (lacking.length > 0) {
    return { action: 'generate-and-update', reason: `the stored certificate lacks DNS names ${lacking.join(', ')}` };
  }
  const renewAt = check.notAfter - renewBeforeMs;
  if (now >= renewAt) {
    return {
      action: 'generate-and-update',
      reason: `the stored certificate expires at ${new Date(check.notAfter).toISOString()}, within the renewal window`,
    };
  }
  return {
    action: 'reuse',
    bundle: { ca, cert, key, notBefore: check.notBefore, notAfter: check.notAfter, dnsNames: check.dnsNames },
    renewAt,
  };
}
