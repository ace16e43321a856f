// Renders the shipped kustomize overlays the way a user installs them into
// their own namespace: an overlay of their own with `namespace:` and the
// replacements block copied from ours (docs/getting-started.md), built by
// the real `kubectl kustomize`, then applied with `kubectl apply`.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse, parseAllDocuments, stringify } from 'yaml';
import type { KubeObject } from '../../src/runtime/kube/types.ts';

const exec = promisify(execFile);
export const KUSTOMIZE = fileURLToPath(new URL('../../deploy/kustomize/', import.meta.url));
export const OVERLAYS = ['rollouts', 'webhooks', 'cluster-wide', 'ha', 'all'] as const;
export type Overlay = (typeof OVERLAYS)[number];

export type Manifest = KubeObject & Record<string, unknown>;

export async function kustomize(dir: string): Promise<Manifest[]> {
  const { stdout } = await exec('kubectl', ['kustomize', dir], { maxBuffer: 64 * 1024 * 1024 });
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as Manifest)
    .filter((d) => d !== null);
}

/** What a user's overlay may add: our components by name (deploy/kustomize/components/<name>), patches, a name suffix. */
export interface UserOverlay {
  components?: string[];
  patches?: unknown[];
  nameSuffix?: string;
}

/** The overlay rendered into `namespace`, through a user overlay on top of ours. */
export async function renderOverlay(overlay: Overlay, namespace: string, extra: UserOverlay = {}): Promise<Manifest[]> {
  const ours = parse(await readFile(join(KUSTOMIZE, 'overlays', overlay, 'kustomization.yaml'), 'utf8')) as {
    replacements?: unknown[];
  };
  const dir = await mkdtemp(join(tmpdir(), 'stateward-kustomize-'));
  try {
    const user = {
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      namespace,
      ...(extra.nameSuffix ? { nameSuffix: extra.nameSuffix } : {}),
      resources: [relative(dir, join(KUSTOMIZE, 'overlays', overlay))],
      ...(extra.components
        ? { components: extra.components.map((c) => relative(dir, join(KUSTOMIZE, 'components', c))) }
        : {}),
      ...(extra.patches ? { patches: extra.patches } : {}),
      ...(ours.replacements ? { replacements: ours.replacements } : {}),
    };
    await writeFile(join(dir, 'kustomization.yaml'), stringify(user));
    return await kustomize(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function kubectlApply(kubeconfig: string, docs: Manifest[]): Promise<string> {
  const child = execFile(
    'kubectl',
    ['--kubeconfig', kubeconfig, 'apply', '--server-side', '--force-conflicts', '-f', '-'],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  const done = new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`kubectl apply exited ${code}: ${err}`))));
  });
  child.stdin?.end(docs.map((d) => stringify(d)).join('---\n'));
  return done;
}

export const CLUSTER_SCOPED = new Set([
  'Namespace',
  'CustomResourceDefinition',
  'ClusterRole',
  'ClusterRoleBinding',
  'ValidatingWebhookConfiguration',
  'MutatingWebhookConfiguration',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
]);

/** Deletes what an apply created outside the test namespace (CRDs stay: other tests share them). */
export async function deleteClusterScoped(kubeconfig: string, docs: Manifest[]): Promise<void> {
  const names = docs
    .filter((d) => CLUSTER_SCOPED.has(d.kind ?? '') && d.kind !== 'Namespace' && d.kind !== 'CustomResourceDefinition')
    .map((d) => `${d.kind}/${d.metadata?.name}`);
  if (names.length > 0)
    await exec('kubectl', ['--kubeconfig', kubeconfig, 'delete', '--ignore-not-found', '--wait=false', ...names]);
}
