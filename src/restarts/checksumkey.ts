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

export const CHECKSUM_KEY_FIELD = 'key';
const KEY_BYTES = 32;

/** Reads the key Secret, creating it with a random key if it does not exist yet. */
export async function ensureChecksumKey(client: KubeClient, namespace: string, name: string, signal?: AbortSignal): Promise<Buffer> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const secret = await client.get<Secret>(resources.secrets, { namespace, name }, { signal });
      const encoded = secret.data?.[CHECKSUM_KEY_FIELD];
      const key = encoded === undefined ? undefined : Buffer.from(encoded, 'base64');
      if (!key || key.length < 16) throw new Error(`Secret ${namespace}/${name} has no usable "${CHECKSUM_KEY_FIELD}" (at least 16 bytes, base64); delete it to have a new key made (every opted-in workload then restarts once)`);
      return key;
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    try {
      const key = randomBytes(KEY_BYTES);
      await client.create<Secret>(resources.secrets, { metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'stateward' } }, data: { [CHECKSUM_KEY_FIELD]: key.toString('base64') } }, { signal });
      return key;
    } catch (error) {
      // Another replica created it first: read theirs.
      if (!isAlreadyExists(error)) throw error;
    }
  }
  throw new Error(`could not read or create the checksum key Secret ${namespace}/${name}`);
}
