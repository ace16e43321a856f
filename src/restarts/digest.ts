// What the ConfigMap and Secret caches of config-change restarts hold: each
// object's metadata and the checksums of its content, never the content.
//
// The informers list and watch configs in full, and this transform runs on
// every object as the response that carried it is decoded, before the object
// reaches a cache or a handler: `data` and `binaryData` are hashed and left
// behind, so a Secret value lives only as long as the decoded page or watch
// event it came in. That is what lets the controller know every config's
// checksum from its LISTs and watch alone — no GET per config on start, on a
// change or after a failover (a metadata-only cache needed one GET per
// referenced config, ~400 s for 2,000 of them at 5 requests/s).
import { createSecretKey } from 'node:crypto';
import type { KubeObject } from '../runtime/kube/types.ts';
import { configChecksum, xingLegacyChecksum, type ConfigPayload } from './hash.ts';
import type { ConfigKind } from './references.ts';

/** A ConfigMap or Secret as cached: metadata and checksums only. */
export interface ConfigDigest extends KubeObject {
  digest: {
    /** Stateward's keyed checksum ("v1:…"), the one written to workloads. */
    checksum: string;
    /** xing's unkeyed checksum, only compared with values xing stored (a takeover without a restart storm). */
    legacy: string;
  };
}

/**
 * The informer transform for one kind. It never throws (an informer caches an
 * object its transform rejects as it came, values included): content it
 * cannot hash — never sent by a real API server — gets a checksum that
 * changes with every resourceVersion, so its changes still restart.
 */
export function configDigester(key: Buffer, kind: ConfigKind): (object: KubeObject) => ConfigDigest {
  const secretKey = createSecretKey(key);
  return (object) => {
    const payload = object as KubeObject & ConfigPayload;
    const { managedFields: _dropped, ...metadata } = payload.metadata ?? {};
    let digest: ConfigDigest['digest'];
    try {
      digest = { checksum: configChecksum(secretKey, payload, kind), legacy: xingLegacyChecksum(payload) };
    } catch {
      const marker = `unhashable:${metadata.resourceVersion ?? ''}`;
      digest = { checksum: marker, legacy: marker };
    }
    // Re-parsed, not just copied: V8's JSON.parse makes each longer string it
    // decodes (a uid, a timestamp, a long name) a slice of the whole response
    // text, so keeping one of them would keep the page or watch event — Secret
    // values included — alive for as long as the cache holds the object.
    return {
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata: JSON.parse(JSON.stringify(metadata)) as typeof metadata,
      digest,
    };
  };
}
