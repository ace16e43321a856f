// Builds the helm CLI from Helm's Go module into the per-user cache outside
// the repository, the way test/cluster/build.ts builds the control plane:
// keyed by the pinned versions and the Go version, so every clone on a machine
// shares one build, a version bump rebuilds, and no prebuilt binary is fetched.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { cacheRoot } from '../cluster/build.ts';
import { cachedBinary, goOutput, goToLog, type Log, parseEnv, stderrLog } from './go.ts';

const versionsFile = join(import.meta.dirname, 'versions.env');

export interface HelmPin {
  /** A release tag of the module, e.g. v4.3.1. */
  version: string;
  /** The main package to install, e.g. helm.sh/helm/v4/cmd/helm. */
  module: string;
}

export async function readHelmPin(): Promise<HelmPin> {
  const values = parseEnv(await readFile(versionsFile, 'utf8'));
  const version = values['HELM_VERSION'];
  const module = values['HELM_MODULE'];
  if (!version) throw new Error('test/tools/versions.env: HELM_VERSION is missing');
  if (!module) throw new Error('test/tools/versions.env: HELM_MODULE is missing');
  return { version, module };
}

/** The cache directory: pinned version plus a hash of versions.env and the Go version. */
export async function helmDir(pin: HelmPin): Promise<string> {
  const hash = createHash('sha256')
    .update(await readFile(versionsFile))
    // A Go upgrade changes the binary (and what `helm version` reports).
    .update((await goOutput(['env', 'GOVERSION'])).trim())
    .digest('hex')
    .slice(0, 12);
  return join(cacheRoot(), 'tools', `helm-${pin.version}-${hash}`);
}

/** The path of the cached helm binary, built on first use. */
export async function helmBinary(options: { log?: Log } = {}): Promise<string> {
  const pin = await readHelmPin();
  return cachedBinary({
    dir: await helmDir(pin),
    name: 'helm',
    what: `helm ${pin.version}`,
    info: { ...pin },
    log: options.log ?? stderrLog,
    build: (binary, logPath) => build(pin, binary, logPath),
  });
}

/** Runs the cached helm; `out` is both streams, for assertions' messages. */
export async function helm(...args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(await helmBinary(), args, { maxBuffer: 32 * 1024 * 1024 });
    return { ok: true, out: stdout + stderr };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

async function build(pin: HelmPin, binary: string, logPath: string): Promise<void> {
  // go install writes into GOBIN; a private one keeps a half-written file away
  // from `binary`, and the rename below publishes it atomically.
  const gobin = join(dirname(binary), '.gobin');
  await rm(gobin, { recursive: true, force: true });
  try {
    // `go install pkg@version` builds with Helm's own go.mod and go.sum, so
    // the dependency set is exactly the release's. GOFLAGS is cleared because
    // flags meant for this repository's modules (e.g. -mod) break it.
    await goToLog(
      'helm',
      ['install', '-trimpath', '-ldflags', helmLdflags(pin), `${pin.module}@${pin.version}`],
      logPath,
      { env: { GOBIN: gobin, GOFLAGS: '', CGO_ENABLED: '0' } },
    );
    await rename(join(gobin, 'helm'), binary);
  } finally {
    await rm(gobin, { recursive: true, force: true });
  }
}

/**
 * Helm's Makefile stamps the version with -X; without it a module build
 * reports only the major.minor compiled into the source (e.g. "v4.3").
 */
function helmLdflags(pin: HelmPin): string {
  const moduleRoot = /^(.*)\/cmd\/helm$/.exec(pin.module)?.[1];
  if (!moduleRoot) throw new Error(`test/tools/versions.env: HELM_MODULE must end in /cmd/helm, got ${pin.module}`);
  return `-s -w -X ${moduleRoot}/internal/version.version=${pin.version}`;
}
