// A user's own kustomization over one of ours, as docs/getting-started.md
// has users write it: their namespace, our replacements, the image they run
// and, on the local cluster, what puts the operator on its real node (the
// image is loaded into the node's containerd; there is no registry to pull
// from). Used by the real-node tests and `npm run demo -- --in-cluster`.
import { readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parse, stringify } from 'yaml';
import { REAL_NODE } from '../cluster/realnode-host.ts';
import { KUSTOMIZE } from './manifests.ts';

export interface UserOverlay {
  namespace: string;
  /** One of deploy/kustomize/overlays. */
  overlay: string;
  /** The image to run, `repository:tag`. */
  image: string;
  /** Arguments added to the operator's, e.g. -web.enabled. */
  extraArgs?: string[];
}

/** Writes kustomization.yaml into `dir`, for `kubectl apply --server-side -k dir`. */
export async function writeUserOverlay(dir: string, o: UserOverlay): Promise<void> {
  const ours = parse(await readFile(join(KUSTOMIZE, 'overlays', o.overlay, 'kustomization.yaml'), 'utf8')) as {
    replacements?: unknown[];
  };
  const [repository, tag] = o.image.split(/:(?=[^:]+$)/) as [string, string];
  const patch = [
    { op: 'add', path: '/spec/template/spec/nodeSelector', value: REAL_NODE.labels },
    {
      op: 'add',
      path: '/spec/template/spec/tolerations',
      value: [{ key: REAL_NODE.taint.key, operator: 'Exists', effect: REAL_NODE.taint.effect }],
    },
    { op: 'add', path: '/spec/template/spec/containers/0/imagePullPolicy', value: 'Never' },
    ...(o.extraArgs ?? []).map((arg) => ({ op: 'add', path: '/spec/template/spec/containers/0/args/-', value: arg })),
  ];
  await writeFile(
    join(dir, 'kustomization.yaml'),
    stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      namespace: o.namespace,
      resources: [relative(dir, join(KUSTOMIZE, 'overlays', o.overlay))],
      images: [{ name: 'ghcr.io/stateward/stateward', newName: repository, newTag: tag }],
      patches: [{ target: { kind: 'Deployment', name: 'stateward' }, patch: stringify(patch) }],
      ...(ours.replacements ? { replacements: ours.replacements } : {}),
    }),
  );
}
