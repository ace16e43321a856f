// Builds the OpenTelemetry Collector the tracing tests export to, from the
// small main package in test/tools/otelcol (the core distribution's OTLP
// receiver and debug exporter) with the machine's Go, into the per-user cache
// outside the repository. The key is a hash of that folder's go.mod, go.sum
// and main.go plus the Go version: a pin bump rebuilds, every clone on a
// machine shares one build, and no prebuilt binary is fetched.
import { createHash } from 'node:crypto';
import { readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheRoot } from '../cluster/build.ts';
import { cachedBinary, goOutput, goToLog, type Log, stderrLog } from './go.ts';

const moduleDir = join(import.meta.dirname, 'otelcol');
const PINNED_FILES = ['go.mod', 'go.sum', 'main.go'];

/** The collector release the module pins (go.opentelemetry.io/collector/otelcol's version). */
export async function otelcolVersion(): Promise<string> {
  const goMod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const version = /go\.opentelemetry\.io\/collector\/otelcol (v\S+)/.exec(goMod)?.[1];
  if (!version) throw new Error('test/tools/otelcol/go.mod does not require go.opentelemetry.io/collector/otelcol');
  return version;
}

async function otelcolDir(version: string): Promise<string> {
  const hash = createHash('sha256');
  for (const file of PINNED_FILES) hash.update(await readFile(join(moduleDir, file)));
  hash.update((await goOutput(['env', 'GOVERSION'])).trim());
  return join(cacheRoot(), 'tools', `otelcol-${version}-${hash.digest('hex').slice(0, 12)}`);
}

/** The path of the cached collector binary, built on first use. */
export async function otelcolBinary(options: { log?: Log } = {}): Promise<string> {
  const version = await otelcolVersion();
  return cachedBinary({
    dir: await otelcolDir(version),
    name: 'otelcol',
    what: `the OpenTelemetry Collector ${version}`,
    info: { version },
    log: options.log ?? stderrLog,
    build: async (binary, logPath) => {
      const partial = `${binary}.partial`;
      await rm(partial, { force: true });
      // go.sum pins every dependency; -mod=readonly refuses to change it.
      await goToLog(
        'the OpenTelemetry Collector',
        ['build', '-trimpath', '-ldflags', `-s -w -X main.version=${version}`, '-o', partial, '.'],
        logPath,
        { cwd: moduleDir, env: { GOFLAGS: '-mod=readonly', CGO_ENABLED: '0' } },
      );
      await rename(partial, binary);
    },
  });
}
