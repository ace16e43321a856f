// The HMAC key behind config checksums. Checksums are written into workload
// annotations, which many more people can read than the Secrets they
// summarise; a keyed hash keeps a low-entropy Secret (a short password) from
// being recovered by hashing guesses. The key must be the same for every
// replica and across restarts — a new key would change every checksum and
// restart every workload — so it lives in a Secret of the operator's
// namespace, created once (the first writer wins a create race).
import { randomBytes } from 'node:crypto';
import type { KubeClient } from '../runtime/kube/client.ts';
import { isAlreadyExists, isNotFound } from '../runtime/kube/errors.ts';
import { resources, type Secret } from '../runtime/kube/types.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Logger } from '../runtime/log/logger.ts';
import { backoffDelay } from '../runtime/workqueue/ratelimiter.ts';

export const CHECKSUM_KEY_FIELD = 'key';
const KEY_BYTES = 32;

/**
 * Reads the key Secret, creating it with a random key if it does not exist
 * yet. Until that works — the API server unreachable, the Secret unusable, a
 * permission missing — it warns and tries again (backing off to 30 s) until
 * `signal` aborts: the config caches cannot start without the key.
 */
export async function ensureChecksumKey(
  client: KubeClient,
  namespace: string,
  name: string,
  options: { signal: AbortSignal; clock: Clock; log?: Logger },
): Promise<Buffer> {
  const { signal, clock, log } = options;
  for (let attempt = 1; ; attempt++) {
    try {
      return await readOrCreateKey(client, namespace, name, signal);
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      const delayMs = backoffDelay(attempt, { initialMs: 500, maxMs: 30_000, spread: 0.2 });
      log?.warn('config restarts wait for their checksum key', {
        secret: `${namespace}/${name}`,
        err: error instanceof Error ? error.message : String(error),
        retryInMs: Math.round(delayMs),
      });
      await clock.sleep(delayMs, signal);
    }
  }
}

async function readOrCreateKey(
  client: KubeClient,
  namespace: string,
  name: string,
  signal: AbortSignal,
): Promise<Buffer> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const secret = await client.get<Secret>(resources.secrets, { namespace, name }, { signal });
      const encoded = secret.data?.[CHECKSUM_KEY_FIELD];
      const key = encoded === undefined ? undefined : Buffer.from(encoded, 'base64');
      if (!key || key.length < 16)
        throw new Error(
          `Secret ${namespace}/${name} has no usable "${CHECKSUM_KEY_FIELD}" (at least 16 bytes, base64); delete it to have a new key made (every opted-in workload then restarts once)`,
        );
      return key;
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    try {
      const key = randomBytes(KEY_BYTES);
      await client.create<Secret>(
        resources.secrets,
        {
          metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'stateward' } },
          data: { [CHECKSUM_KEY_FIELD]: key.toString('base64') },
        },
        { signal },
      );
      return key;
    } catch (error) {
      // Another replica created it first: read theirs.
      if (!isAlreadyExists(error)) throw error;
    }
  }
  throw new Error(`could not read or create the checksum key Secret ${namespace}/${name}`);
}
