// Builds what the local cluster's real node runs, into a per-user cache keyed
// like the control plane's (build.ts): the kubelet + kube-proxy multi-call
// binary from test/cluster/node/ (the control plane's Kubernetes version and
// module graph), containerd v2 with its runc shim and ctr, and crictl, each
// at the version pinned in test/cluster/node/versions.env, from the Go module
// proxy; and the pause binary from Kubernetes' own pause.c. Nothing here is
// built unless a real node is asked for, and nothing here is part of the
// control plane's cache key.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  buildStep,
  cacheRoot,
  goVersion,
  kubernetesVersionLdflags,
  readPinnedVersions,
  recordBuild,
  run,
} from './build.ts';
import { acquireLock } from './lock.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const nodeModuleDir = join(here, 'node');

export interface NodeVersions {
  /** The control plane's (test/cluster/controlplane/versions.env): kubelet and kube-proxy match it. */
  KUBERNETES_VERSION: string;
  CONTAINERD_VERSION: string;
  CRICTL_VERSION: string;
}

export interface NodeBinaries {
  /** Multi-call binary: kubelet | kube-proxy. */
  node: string;
  containerd: string;
  /** containerd-shim-runc-v2; containerd finds it on PATH, so it sits next to containerd. */
  shim: string;
  ctr: string;
  crictl: string;
  /** Kubernetes' pause (build/pause/linux/pause.c), static: the sandbox image's only file. */
  pause: string;
  versions: NodeVersions;
  dir: string;
  key: string;
}

/**
 * How the binaries are built, part of the cache key: a change of flags or
 * tags rebuilds. containerd without its btrfs snapshotter (no btrfs headers
 * needed), as upstream's `no_btrfs` tag allows.
 */
const RECIPE = 'stateward-node:trimpath,s,w,gitVersion;containerd:no_btrfs,trimpath,s,w;crictl;pause:gcc-Os-static';

function parseEnv(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const match = /^([A-Z_]+)=(\S+)\s*$/.exec(line);
    if (match) values[match[1]!] = match[2]!;
  }
  return values;
}

export async function readNodeVersions(): Promise<NodeVersions> {
  const values = parseEnv(await readFile(join(nodeModuleDir, 'versions.env'), 'utf8'));
  for (const name of ['CONTAINERD_VERSION', 'CRICTL_VERSION']) {
    if (!values[name]) throw new Error(`test/cluster/node/versions.env: ${name} is missing`);
  }
  const { KUBERNETES_VERSION } = await readPinnedVersions();
  return {
    KUBERNETES_VERSION,
    CONTAINERD_VERSION: values['CONTAINERD_VERSION']!,
    CRICTL_VERSION: values['CRICTL_VERSION']!,
  };
}

export async function nodeCacheKey(versions: NodeVersions): Promise<string> {
  const hash = createHash('sha256');
  for (const file of ['versions.env', 'go.mod', 'go.sum', 'main.go']) {
    hash.update(file).update(await readFile(join(nodeModuleDir, file)));
  }
  hash.update('controlplane/versions.env').update(await readFile(join(here, 'controlplane', 'versions.env')));
  hash.update(RECIPE).update(await goVersion(nodeModuleDir));
  return `k8s-${versions.KUBERNETES_VERSION}-containerd-${versions.CONTAINERD_VERSION}-crictl-${versions.CRICTL_VERSION}-${hash.digest('hex').slice(0, 12)}`;
}

export async function nodeBinariesDir(): Promise<{ dir: string; versions: NodeVersions; key: string }> {
  const versions = await readNodeVersions();
  const key = await nodeCacheKey(versions);
  return { dir: join(cacheRoot(), 'realnode', 'bin', key), versions, key };
}

function binariesIn(dir: string, versions: NodeVersions, key: string): NodeBinaries {
  return {
    node: join(dir, 'stateward-node'),
    containerd: join(dir, 'containerd'),
    shim: join(dir, 'containerd-shim-runc-v2'),
    ctr: join(dir, 'ctr'),
    crictl: join(dir, 'crictl'),
    pause: join(dir, 'pause'),
    versions,
    dir,
    key,
  };
}

/** Returns the cached binaries of the real node, building whatever is missing. */
export async function ensureNodeBinaries(options: { log?: (line: string) => void } = {}): Promise<NodeBinaries> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const { dir, versions, key } = await nodeBinariesDir();
  const binaries = binariesIn(dir, versions, key);
  const all = [binaries.node, binaries.containerd, binaries.shim, binaries.ctr, binaries.crictl, binaries.pause];
  if (all.every((path) => existsSync(path))) return binaries;

  await mkdir(dir, { recursive: true });
  const release = await acquireLock(join(dir, '.build.lock'), {
    waitingMessage: () => log(`waiting for another build in ${dir}`),
  });
  try {
    const timings: Record<string, number> = {};
    const timed = async (name: string, step: () => Promise<void>) => {
      const started = Date.now();
      await step();
      timings[name] = Date.now() - started;
    };
    // Second look: another process may have built them while we waited.
    if (!existsSync(binaries.node)) {
      await timed('stateward-node', async () => {
        log(
          `building kubelet and kube-proxy ${versions.KUBERNETES_VERSION} for the real node (cold builds take a few minutes; log: ${join(dir, 'build-node.log')})`,
        );
        const ldflags = [
          '-s -w',
          `-X main.version=${key}`,
          ...kubernetesVersionLdflags(versions.KUBERNETES_VERSION),
        ].join(' ');
        await buildStep(
          'node',
          dir,
          'go',
          ['build', '-trimpath', '-ldflags', ldflags, '-o', `${binaries.node}.tmp`, '.'],
          { cwd: nodeModuleDir, env: { GOFLAGS: '-mod=readonly' } },
        );
        await rename(`${binaries.node}.tmp`, binaries.node);
      });
    }
    if (![binaries.containerd, binaries.shim, binaries.ctr].every((path) => existsSync(path))) {
      await timed('containerd', async () => {
        log(`building containerd ${versions.CONTAINERD_VERSION} (log: ${join(dir, 'build-containerd.log')})`);
        const v = versions.CONTAINERD_VERSION;
        await goInstall(
          'containerd',
          dir,
          ['containerd', 'containerd-shim-runc-v2', 'ctr'].map(
            (cmd) => `github.com/containerd/containerd/v2/cmd/${cmd}@${v}`,
          ),
          [
            '-tags',
            'no_btrfs',
            '-trimpath',
            '-ldflags',
            `-s -w -X github.com/containerd/containerd/v2/version.Version=${v}`,
          ],
        );
      });
    }
    if (!existsSync(binaries.crictl)) {
      await timed('crictl', async () => {
        log(`building crictl ${versions.CRICTL_VERSION} (log: ${join(dir, 'build-crictl.log')})`);
        await goInstall('crictl', dir, [`sigs.k8s.io/cri-tools/cmd/crictl@${versions.CRICTL_VERSION}`], ['-trimpath']);
      });
    }
    if (!existsSync(binaries.pause)) {
      await timed('pause', async () => {
        // The module cache holds k8s.io/kubernetes once the node module's dependencies are downloaded.
        await buildStep('pause-source', dir, 'go', ['mod', 'download', `k8s.io/kubernetes`], {
          cwd: nodeModuleDir,
          env: { GOFLAGS: '-mod=readonly' },
        });
        const { stdout } = await run('go', ['list', '-m', '-f', '{{.Dir}}', 'k8s.io/kubernetes'], {
          cwd: nodeModuleDir,
        });
        const source = join(stdout.trim(), 'build', 'pause', 'linux', 'pause.c');
        await buildStep(
          'pause',
          dir,
          'gcc',
          [
            '-Os',
            '-Wall',
            '-Werror',
            '-static',
            '-s',
            `-DVERSION=${versions.KUBERNETES_VERSION}-stateward`,
            '-o',
            `${binaries.pause}.tmp`,
            source,
          ],
          { cwd: dir, env: {} },
        );
        await rename(`${binaries.pause}.tmp`, binaries.pause);
      });
    }
    await recordBuild(dir, { key, versions, timings, what: 'real node binaries', log });
  } finally {
    await release();
  }
  return binaries;
}

/** `go install pkg@version ...` outside any module (with the tool's own go.mod), moved into dir. */
async function goInstall(component: string, dir: string, packages: string[], flags: string[]): Promise<void> {
  const gobin = join(dir, `.${component}-gobin`);
  await rm(gobin, { recursive: true, force: true });
  await buildStep(component, dir, 'go', ['install', ...flags, ...packages], {
    cwd: dir,
    env: { GOBIN: gobin, GOFLAGS: '' },
  });
  for (const pkg of packages) {
    const name = pkg.replace(/@.*$/, '').split('/').pop()!;
    await rename(join(gobin, name), join(dir, name));
  }
  await rm(gobin, { recursive: true, force: true });
}
