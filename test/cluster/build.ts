// Builds the control-plane binaries into a per-user cache outside the
// repository, keyed by the pinned versions and the sources that produce them,
// so every clone on a machine shares one build and a version bump rebuilds.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { acquireLock } from './lock.ts';

const here = dirname(fileURLToPath(import.meta.url));
export const controlPlaneModuleDir = join(here, 'controlplane');

export interface PinnedVersions {
  KUBERNETES_VERSION: string;
  ETCD_VERSION: string;
  KWOK_VERSION: string;
}

export interface Binaries {
  /** Multi-call binary: apiserver | controller-manager | scheduler | etcd. */
  controlPlane: string;
  kwok: string;
  versions: PinnedVersions;
  dir: string;
}

export function cacheRoot(): string {
  const base =
    process.env['STATEWARD_CACHE_DIR'] ?? join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'stateward');
  return resolve(base);
}

export async function readPinnedVersions(): Promise<PinnedVersions> {
  const text = await readFile(join(controlPlaneModuleDir, 'versions.env'), 'utf8');
  const values: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const match = /^([A-Z_]+)=(\S+)\s*$/.exec(line);
    if (match) values[match[1]!] = match[2]!;
  }
  for (const name of ['KUBERNETES_VERSION', 'ETCD_VERSION', 'KWOK_VERSION']) {
    if (!values[name]) throw new Error(`test/cluster/controlplane/versions.env: ${name} is missing`);
  }
  return values as unknown as PinnedVersions;
}

export async function goVersion(cwd = controlPlaneModuleDir): Promise<string> {
  const { stdout } = await run('go', ['env', 'GOVERSION'], { cwd });
  return stdout.trim();
}

/**
 * Linker flags that stamp a Kubernetes component with its release: built
 * from the module without them, it reports v0.0.0-master to everyone who
 * asks (`kubectl version`, node info, and Helm, which then refuses a chart's
 * kubeVersion constraint).
 */
export function kubernetesVersionLdflags(version: string): string[] {
  const [major, minor] = version.replace(/^v/, '').split('.');
  const stamp = (name: string, value: string) => `-X k8s.io/component-base/version.${name}=${value}`;
  return [
    stamp('gitVersion', version),
    stamp('gitMajor', major ?? ''),
    stamp('gitMinor', minor ?? ''),
    stamp('gitTreeState', 'clean'),
  ];
}

/** How the control plane binary is built, in its cache key: a change rebuilds it. */
const RECIPE = 'stateward-controlplane:trimpath,s,w,gitVersion';

/** The cache key: pinned versions, Go version and a hash of every build input. */
export async function cacheKey(versions: PinnedVersions): Promise<string> {
  const hash = createHash('sha256');
  for (const file of ['versions.env', 'go.mod', 'go.sum', 'main.go']) {
    hash.update(file).update(await readFile(join(controlPlaneModuleDir, file)));
  }
  hash.update(RECIPE).update(await goVersion());
  return `k8s-${versions.KUBERNETES_VERSION}-etcd-${versions.ETCD_VERSION}-kwok-${versions.KWOK_VERSION}-${hash.digest('hex').slice(0, 12)}`;
}

export async function binariesDir(): Promise<{ dir: string; versions: PinnedVersions; key: string }> {
  const versions = await readPinnedVersions();
  const key = await cacheKey(versions);
  return { dir: join(cacheRoot(), 'controlplane', key), versions, key };
}

/** Returns the cached binaries, building whatever is missing. */
export async function ensureBinaries(options: { log?: (line: string) => void } = {}): Promise<Binaries> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const { dir, versions, key } = await binariesDir();
  const binaries: Binaries = {
    controlPlane: join(dir, 'stateward-controlplane'),
    kwok: join(dir, 'kwok'),
    versions,
    dir,
  };
  if (existsSync(binaries.controlPlane) && existsSync(binaries.kwok)) return binaries;

  await mkdir(dir, { recursive: true });
  // Two test runs starting at once must not both spend 20 minutes building.
  const release = await acquireLock(join(dir, '.build.lock'), {
    waitingMessage: () => log(`waiting for another build in ${dir}`),
  });
  try {
    const timings: Record<string, number> = {};
    if (!existsSync(binaries.controlPlane)) {
      log(
        `building kube-apiserver, kube-controller-manager, kube-scheduler ${versions.KUBERNETES_VERSION} and etcd ${versions.ETCD_VERSION} (cold builds take a while; log: ${join(dir, 'build-controlplane.log')})`,
      );
      const started = Date.now();
      await buildStep(
        'controlplane',
        dir,
        'go',
        [
          'build',
          '-trimpath',
          '-ldflags',
          ['-s -w', `-X main.version=${key}`, ...kubernetesVersionLdflags(versions.KUBERNETES_VERSION)].join(' '),
          '-o',
          `${binaries.controlPlane}.tmp`,
          '.',
        ],
        {
          cwd: controlPlaneModuleDir,
          env: { GOFLAGS: '-mod=readonly' },
        },
      );
      await rename(`${binaries.controlPlane}.tmp`, binaries.controlPlane);
      timings['controlplane'] = Date.now() - started;
    }
    if (!existsSync(binaries.kwok)) {
      log(`building kwok ${versions.KWOK_VERSION} (log: ${join(dir, 'build-kwok.log')})`);
      const started = Date.now();
      const gobin = join(dir, '.kwok-gobin');
      await rm(gobin, { recursive: true, force: true });
      // `go install pkg@version` builds outside any module, with kwok's own go.mod.
      await buildStep('kwok', dir, 'go', ['install', `sigs.k8s.io/kwok/cmd/kwok@${versions.KWOK_VERSION}`], {
        cwd: dir,
        env: { GOBIN: gobin, GOFLAGS: '' },
      });
      await rename(join(gobin, 'kwok'), binaries.kwok);
      await rm(gobin, { recursive: true, force: true });
      timings['kwok'] = Date.now() - started;
    }
    await recordBuild(dir, { key, versions, timings, what: 'control plane binaries', log });
  } finally {
    await release();
  }
  return binaries;
}

/** Writes what a build made into its cache directory (build-info.json) and says it is ready, with each step's time. */
export async function recordBuild(
  dir: string,
  o: { key: string; versions: object; timings: Record<string, number>; what: string; log: (line: string) => void },
): Promise<void> {
  await writeFile(
    join(dir, 'build-info.json'),
    JSON.stringify(
      { key: o.key, versions: o.versions, timingsMs: o.timings, builtAt: new Date().toISOString() },
      null,
      2,
    ),
  );
  const steps = Object.entries(o.timings)
    .map(([k, v]) => `${k} ${(v / 1000).toFixed(0)}s`)
    .join(', ');
  o.log(`${o.what} ready in ${dir} (${steps})`);
}

export async function buildStep(
  component: string,
  dir: string,
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string> },
): Promise<void> {
  const logPath = join(dir, `build-${component}.log`);
  const logStream = createWriteStream(logPath);
  const code = await new Promise<number>((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      // GOTOOLCHAIN=local: never try to download another Go toolchain.
      env: { ...process.env, GOTOOLCHAIN: 'local', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.pipe(logStream, { end: false });
    child.stderr.pipe(logStream, { end: false });
    child.on('error', reject);
    child.on('close', (exitCode) => resolvePromise(exitCode ?? 1));
  }).catch((error: unknown) => {
    throw new Error(`building ${component} failed: cannot run ${command}: ${String(error)} (is Go installed?)`);
  });
  await new Promise<void>((resolvePromise) => logStream.end(resolvePromise));
  if (code !== 0) {
    const tail = (await readFile(logPath, 'utf8')).trimEnd().split('\n').slice(-15).join('\n');
    throw new Error(`building ${component} failed (exit ${code}); full log: ${logPath}\n${tail}`);
  }
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

export async function run(command: string, args: string[], options: { cwd: string }): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: { ...process.env, GOTOOLCHAIN: 'local' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', (error) => reject(new Error(`cannot run ${command}: ${error.message}`)));
    child.on('close', (code) =>
      code === 0
        ? resolvePromise({ stdout, stderr })
        : reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${stderr}`)),
    );
  });
}

export async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
