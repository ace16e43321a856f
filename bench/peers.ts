// The peers of the side-by-side benches: stakater/Reloader and xing's
// kubernetes-deployment-restart-controller (restarts, issue 23), and
// grafana/rollout-operator (versus, issue 19), built from their own sources
// at pinned commits with the local Go toolchain, into a cache outside the
// repository keyed by commit (<cache>/peers/<name>-<commit>/<binary>), on
// first use only. Nothing of theirs is copied into this repository.
//
// Sources are never fetched here: a peer's tree is expected at
// <cache>/peers/src/<name>-<commit> (the message for a missing one says how
// to put it there). `go` may download their modules from the module proxy.
// Builds run in a scratch copy of the source, so a fallback edit of go.mod
// (listed per peer, recorded with the binary and printed with the figures)
// never touches the source tree nor anything in this repository.
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { cp, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { cacheRoot } from '../test/cluster/build.ts';

export type PeerName = 'reloader' | 'xing' | 'rollout-operator';

export interface PeerSpec {
  name: PeerName;
  title: string;
  /** GitHub owner/name. */
  repo: string;
  /** The pinned commit; the figures in docs/restarts.md name it. */
  commit: string;
  /** What the commit is, for the report. */
  describe: string;
  /** The binary's file name: client-go puts it first in the User-Agent, which is how the audit log tells the peers apart. */
  binary: string;
  /** The main package, relative to the module root; default ".". */
  main?: string;
  /**
   * How `go build` resolves modules: "mod" (default) downloads them from the
   * module proxy; "vendor" uses the source's own vendor/ directory.
   */
  mod?: 'mod' | 'vendor';
  /**
   * Applied to the cache copy only when the build as published fails (then
   * recorded in build-info.json and reported): `go` argument lists, and why.
   */
  fallback?: { why: string; go: string[][] };
}

export const PEERS: Record<PeerName, PeerSpec> = {
  reloader: {
    name: 'reloader',
    title: 'Reloader',
    repo: 'stakater/Reloader',
    commit: '655a2b3814baadb69d3d1e105242d6cc8875d7cb',
    describe: 'v1.4.21 (master 2026-08-10)',
    binary: 'reloader',
    fallback: {
      // The module proxy answers 403 "not available" for the openshift/api
      // pseudo-version this commit's go.mod asks for; openshift/client-go's own
      // go.mod asks for the one before it (2026-03-26), which the proxy serves.
      // It holds the OpenShift API types (DeploymentConfig), unused on plain Kubernetes.
      why: 'github.com/openshift/api pinned to v0.0.0-20260326111139-30c2ef7a272e (the version openshift/client-go requires): the proxy refuses v0.0.0-20260402111718-ad9eb11110b6',
      go: [['mod', 'edit', '-require=github.com/openshift/api@v0.0.0-20260326111139-30c2ef7a272e']],
    },
  },
  xing: {
    name: 'xing',
    title: 'xing',
    repo: 'xing/kubernetes-deployment-restart-controller',
    commit: '71b5c3455cfff1979bf0344f59d618e2872be4ef',
    describe: 'v1.3.0 (2023-03-01)',
    binary: 'kubernetes-deployment-restart-controller',
  },
  'rollout-operator': {
    name: 'rollout-operator',
    title: 'rollout-operator',
    repo: 'grafana/rollout-operator',
    commit: '895779f9086520f35f7d1adc2d129a55c0529353',
    describe: 'v0.38.1',
    binary: 'rollout-operator',
    main: './cmd/rollout-operator',
    // Its tree vendors every module (vendor/modules.txt): built as its Makefile builds it, nothing downloaded.
    mod: 'vendor',
  },
};

/** `notes`: what was changed in the cache copy to build it (nothing when empty). */
export type PeerBinary =
  { ok: true; spec: PeerSpec; path: string; notes: string[] } | { ok: false; spec: PeerSpec; reason: string };

interface BuildInfo {
  repo: string;
  commit: string;
  builtAt: string;
  buildMs: number;
  notes: string[];
}

export function peersDir(): string {
  return join(cacheRoot(), 'peers');
}

export function peerSourceDir(spec: PeerSpec): string {
  return join(peersDir(), 'src', `${spec.name}-${spec.commit}`);
}

/** What to run to put a peer's source where the bench looks for it. */
export function sourceInstructions(spec: PeerSpec): string {
  const dir = peerSourceDir(spec);
  return [
    `the source of ${spec.repo} at ${spec.commit} is not in ${dir}; put it there with`,
    `  git clone https://github.com/${spec.repo} ${dir} && git -C ${dir} checkout --detach ${spec.commit}`,
    `or, from a local clone or mirror <git-dir> that has the commit:`,
    `  mkdir -p ${dir} && git --git-dir=<git-dir> archive ${spec.commit} | tar -x -C ${dir}`,
  ].join('\n');
}

/** The peer's binary, built on first use (minutes: GOMAXPROCS=1 under nice 19, so it does not starve the machine). */
export async function peerBinary(spec: PeerSpec, log: (line: string) => void): Promise<PeerBinary> {
  const dir = join(peersDir(), `${spec.name}-${spec.commit}`);
  const path = join(dir, spec.binary);
  const infoPath = join(dir, 'build-info.json');
  if (existsSync(path)) {
    const info = existsSync(infoPath) ? (JSON.parse(await readFile(infoPath, 'utf8')) as Partial<BuildInfo>) : {};
    return { ok: true, spec, path, notes: info.notes ?? [] };
  }
  const src = peerSourceDir(spec);
  if (!existsSync(join(src, 'go.mod'))) return { ok: false, spec, reason: sourceInstructions(spec) };
  await mkdir(dir, { recursive: true });
  const logPath = join(dir, 'build.log');
  await rm(logPath, { force: true });
  // A scratch copy: the fallback edits go.mod, and the source stays as published.
  const work = join(dir, 'build-src');
  await rm(work, { recursive: true, force: true });
  await cp(src, work, { recursive: true });
  log(
    `building ${spec.title} ${spec.commit.slice(0, 12)} from ${src} (first use; a cold build takes minutes; log: ${logPath})`,
  );
  const started = Date.now();
  // -mod=mod: an old module (xing's, Go 1.20) may have a go.sum the current toolchain wants completed.
  const build = [
    'build',
    '-trimpath',
    '-buildvcs=false',
    `-mod=${spec.mod ?? 'mod'}`,
    '-ldflags',
    '-s -w',
    '-o',
    `${path}.tmp`,
    spec.main ?? '.',
  ];
  const notes: string[] = [];
  let code = await go(build, work, logPath);
  if (code !== 0 && spec.fallback) {
    log(`${spec.title}: go build failed (exit ${code}); in the cache copy: ${spec.fallback.why}`);
    let fixed = 0;
    for (const args of spec.fallback.go) if (fixed === 0) fixed = await go(args, work, logPath);
    notes.push(spec.fallback.why);
    code = fixed || (await go(build, work, logPath));
  }
  if (code !== 0) {
    log(`${spec.title}: go build failed (exit ${code}); trying once more after go mod tidy in the cache copy`);
    notes.push('go mod tidy in the cache copy');
    // After tidy, vendor/ no longer matches go.mod: the modules come from the proxy.
    const tidied = build.map((arg) => (arg === '-mod=vendor' ? '-mod=mod' : arg));
    code = (await go(['mod', 'tidy'], work, logPath)) || (await go(tidied, work, logPath));
  }
  await rm(work, { recursive: true, force: true });
  if (code !== 0) {
    const tail = (await readFile(logPath, 'utf8')).trimEnd().split('\n').slice(-15).join('\n');
    return { ok: false, spec, reason: `building ${spec.title} failed (exit ${code}); full log: ${logPath}\n${tail}` };
  }
  await rename(`${path}.tmp`, path);
  const info: BuildInfo = {
    repo: spec.repo,
    commit: spec.commit,
    builtAt: new Date().toISOString(),
    buildMs: Date.now() - started,
    notes,
  };
  await writeFile(infoPath, JSON.stringify(info, null, 2));
  log(`${spec.title} built in ${((Date.now() - started) / 1000).toFixed(0)} s: ${path}`);
  return { ok: true, spec, path, notes };
}

/** `go <args>` in `cwd` under nice 19 with one OS thread for Go code, output appended to the log; the exit code. */
async function go(args: string[], cwd: string, logPath: string): Promise<number> {
  const out = createWriteStream(logPath, { flags: 'a' });
  out.write(`$ go ${args.join(' ')}\n`);
  try {
    return await new Promise<number>((resolve) => {
      // GOTOOLCHAIN=local: never download another toolchain; CGO off: static binaries, as both projects ship them.
      const child = spawn('nice', ['-n', '19', 'go', ...args], {
        cwd,
        env: { ...process.env, GOTOOLCHAIN: 'local', GOMAXPROCS: '1', CGO_ENABLED: '0', GOFLAGS: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.pipe(out, { end: false });
      child.stderr.pipe(out, { end: false });
      child.on('error', (error) => {
        out.write(`cannot run go: ${error.message} (is Go installed?)\n`);
        resolve(127);
      });
      child.on('close', (code) => resolve(code ?? 1));
    });
  } finally {
    await new Promise<void>((resolve) => out.end(resolve));
  }
}
