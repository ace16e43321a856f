// An object's metadata read the one way every capability reads it: absent
// fields are empty, never undefined, so callers need no guards.
import type { KubeObject } from '../runtime/kube/types.ts';

export function nameOf(o: KubeObject): string {
  return o.metadata?.name ?? '';
}

export function namespaceOf(o: KubeObject): string {
  return o.metadata?.namespace ?? '';
}

export function labelsOf(o: KubeObject): Record<string, string> {
  return o.metadata?.labels ?? {};
}

export function annotationsOf(o: KubeObject): Record<string, string> {
  return o.metadata?.annotations ?? {};
}
