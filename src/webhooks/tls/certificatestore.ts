// Imperative shell around certificateplan.ts: read the certificate Secret, and reuse,
// create or replace it. Several replicas may do this at once (start-up, or
// the same renewAt on every replica); the API's optimistic concurrency picks
// one writer, and the losers adopt what it wrote, so all replicas end up
// serving ONE certificate:
//   - create        → AlreadyExists → re-read, reuse the winner's if valid;
//   - update with the resourceVersion read → Conflict → the same.
// The loop is bounded; a Secret that keeps changing under us is an error.
//
// Key material is never logged: only reasons, expiry times and versions.
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import { generateSelfSigned, type GenerateOptions, type GeneratedCertificate } from './generate.ts';
import { defaultRenewBefore, planCertificate } from './certificateplan.ts';

export interface SecretJson {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [key: string]: unknown };
  data?: Record<string, string> | null;
  [key: string]: unknown;
}

/** Base64 values under exactly the keys `ca`, `cert`, `key`. */
export type SecretData = Record<'ca' | 'cert' | 'key', string>;

export interface CertificateStoreDeps {
  /** The Secret, or undefined when it does not exist. */
  get(): Promise<SecretJson | undefined>;
  /** Creates the Secret (Opaque: no `type`) with this data. */
  create(data: SecretData): Promise<SecretJson>;
  /** Replaces the data of `secret`, guarded by its metadata.resourceVersion. */
  update(secret: SecretJson, data: SecretData): Promise<SecretJson>;
  isConflict(e: unknown): boolean;
  isAlreadyExists(e: unknown): boolean;
  clock: Clock;
  log: Logger;
}

export interface EnsureOptions {
  /** -server-tls.self-signed-cert.org */
  org: string;
  /** SANs wanted; see serviceDnsNames. */
  dnsNames: string[];
  /** -server-tls.self-signed-cert.expiration */
  validityMs: number;
  /** Renew this long before expiry; default defaultRenewBefore(validityMs). */
  renewBeforeMs?: number;
  /** Rounds of read → write before giving up; default 5. */
  maxAttempts?: number;
  /** Injected for tests; default generateSelfSigned. */
  generate?: (options: GenerateOptions) => Promise<GeneratedCertificate>;
}

export interface EnsuredCertificate {
  ca: string;
  cert: string;
  key: string;
  notAfter: number;
  /** When to call ensureCertificate again. */
  renewAt: number;
}

export function encodeSecretData(bundle: { ca: string; cert: string; key: string }): SecretData {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  return { ca: b64(bundle.ca), cert: b64(bundle.cert), key: b64(bundle.key) };
}

export async function ensureCertificate(
  deps: CertificateStoreDeps,
  options: EnsureOptions,
): Promise<EnsuredCertificate> {
  const { clock, log } = deps;
  const renewBeforeMs = options.renewBeforeMs ?? defaultRenewBefore(options.validityMs);
  if (!(renewBeforeMs >= 0 && renewBeforeMs < options.validityMs)) {
    // Otherwise every new certificate would be due for renewal at once.
    throw new Error(
      `renew-before (${renewBeforeMs}ms) must be at least 0 and below the validity (${options.validityMs}ms)`,
    );
  }
  const generate = options.generate ?? generateSelfSigned;
  const maxAttempts = Math.max(1, options.maxAttempts ?? 5);

  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const secret = await deps.get();
    const plan = planCertificate({ secret, now: clock.now(), renewBeforeMs, wantDnsNames: options.dnsNames });
    if (plan.action === 'reuse') {
      const { ca, cert, key, notAfter } = plan.bundle;
      log.info('reusing the stored webhook certificate', {
        notAfter: new Date(notAfter).toISOString(),
        renewAt: new Date(plan.renewAt).toISOString(),
      });
      return { ca, cert, key, notAfter, renewAt: plan.renewAt };
    }
    if (plan.action === 'generate-and-update') {
      if (plan.warning) log.warn(plan.warning, { resourceVersion: secret?.metadata?.resourceVersion });
      else log.info('replacing the stored webhook certificate', { reason: plan.reason });
    }

    const fresh = await generate({
      org: options.org,
      dnsNames: options.dnsNames,
      validityMs: options.validityMs,
      now: clock.now(),
    });
    const data = encodeSecretData(fresh);
    const result: EnsuredCertificate = {
      ca: fresh.ca,
      cert: fresh.cert,
      key: fresh.key,
      notAfter: fresh.notAfter,
      renewAt: fresh.notAfter - renewBeforeMs,
    };
    const fields = { notAfter: new Date(fresh.notAfter).toISOString(), dnsNames: options.dnsNames, attempt };
    try {
      if (plan.action === 'create') {
        await deps.create(data);
        log.info('created the webhook certificate secret', fields);
      } else {
        await deps.update(secret!, data);
        log.info('updated the webhook certificate secret', fields);
      }
      return result;
    } catch (e) {
      if (plan.action === 'create' && deps.isAlreadyExists(e)) {
        log.info('the webhook certificate secret was created concurrently; re-reading it', { attempt });
        continue;
      }
      if (plan.action !== 'create' && deps.isConflict(e)) {
        log.info('the webhook certificate secret was changed concurrently; re-reading it', { attempt });
        continue;
      }
      throw e;
    }
  }
  throw new Error(`could not settle the webhook certificate secret after ${maxAttempts} attempts: it kept changing`);
}
