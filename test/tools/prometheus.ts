// Builds Prometheus, the server the health-gated rollout tests query, from its
// Go module into the per-user cache outside the repository, like helm: keyed
// by the pinned release, the build recipe and the Go version, so every clone on
// a machine shares one build, a pin bump rebuilds, and no prebuilt binary is
// fetched.
//
// The pin lives here rather than in versions.env: that file's hash keys helm's
// cache, and adding a line to it would rebuild helm everywhere.
import { createHash } from 'node:crypto';
import { rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { cacheRoot } from '../cluster/build.ts';
import { cachedBinary, goOutput, goToLog, type Log, stderrLog } from './go.ts';

/** The module release: Prometheus 3.x is tagged v0.3MM.P in Go (v0.316.0 is 3.16.0). */
export const PROMETHEUS_MODULE_VERSION = 'v0.316.0';
const MAIN_PACKAGE = 'github.com/prometheus/prometheus/cmd/prometheus';

/**
 * `remove_all_sd` leaves out every service-discovery plugin but file and http
 * (no AWS, Azure, GCE, Kubernetes … clients): the tests scrape static targets,
 * and the build is minutes shorter. `builtinassets` is NOT set: it embeds the
 * web UI from files that Prometheus's Makefile generates with npm, which the
 * module does not contain (the build fails with "undefined: EmbedFS"). Without
 * it the UI is looked up on disk and answers 404; the HTTP API is complete.
 */
const BUILD_TAGS = 'remove_all_sd';

/** "3.16.0", the release a module version stands for, as `prometheus --version` reports it. */
export function prometheusRelease(moduleVersion: string = PROMETHEUS_MODULE_VERSION): string {
  const match = /^v0\.(\d)(\d\d)\.(\d+)$/.exec(moduleVersion);
  if (!match) throw new Error(`not a Prometheus module version (v0.3MM.P): ${moduleVersion}`);
  return `${match[1]}.${Number(match[2])}.${match[3]}`;
}

function buildArgs(gobinTarget: string): string[] {
  // Prometheus's own build (promu) stamps the version with -X; without it the
  // binary and /api/v1/status/buildinfo report an empty version.
  const ldflags = `-s -w -X github.com/prometheus/common/version.Version=${prometheusRelease()}`;
  return ['install', '-trimpath', '-tags', BUILD_TAGS, '-ldflags', ldflags, gobinTarget];
}

async function prometheusDir(): Promise<string> {
  const hash = createHash('sha256')
    .update(JSON.stringify(buildArgs(`${MAIN_PACKAGE}@${PROMETHEUS_MODULE_VERSION}`)))
    .update((await goOutput(['env', 'GOVERSION'])).trim())
    .digest('hex')
    .slice(0, 12);
  return join(cacheRoot(), 'tools', `prometheus-${PROMETHEUS_MODULE_VERSION}-${hash}`);
}

/** The path of the cached prometheus binary, built on first use. */
export async function prometheusBinary(options: { log?: Log } = {}): Promise<string> {
  return cachedBinary({
    dir: await prometheusDir(),
    name: 'prometheus',
    what: `Prometheus ${prometheusRelease()} (${PROMETHEUS_MODULE_VERSION})`,
    info: { version: PROMETHEUS_MODULE_VERSION, module: MAIN_PACKAGE, tags: BUILD_TAGS },
    log: options.log ?? stderrLog,
    build: (binary, logPath) => build(binary, logPath),
  });
}

async function build(binary: string, logPath: string): Promise<void> {
  // As for helm: a private GOBIN keeps a half-written file away from `binary`.
  const gobin = join(dirname(binary), '.gobin');
  await rm(gobin, { recursive: true, force: true });
  try {
    // `go install pkg@version` builds with the release's own go.mod and go.sum.
    // GOFLAGS is cleared because flags meant for this repository's modules
    // (e.g. -mod) break it.
    await goToLog('Prometheus', buildArgs(`${MAIN_PACKAGE}@${PROMETHEUS_MODULE_VERSION}`), logPath, {
      env: { GOBIN: gobin, GOFLAGS: '', CGO_ENABLED: '0' },
    });
    await rename(join(gobin, 'prometheus'), binary);
  } finally {
    await rm(gobin, { recursive: true, force: true });
  }
}
