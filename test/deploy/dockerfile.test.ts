// The Dockerfile, checked without a Docker engine: its bases are Node 24
// (the same Node the tests run on), every path it copies exists and passes
// .dockerignore, it runs as a non-root user, and its entrypoint starts from
// a production-only install and a type-stripped build made the way its build
// stage makes them.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

interface Instruction {
  op: string;
  args: string;
}

/** Instructions with line continuations joined and comments dropped. */
function instructions(text: string): Instruction[] {
  const joined = text
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('#'))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(' ') };
    });
}

/** The final stage's instructions. */
function finalStage(all: Instruction[]): Instruction[] {
  const last = all.findLastIndex((i) => i.op === 'FROM');
  return all.slice(last);
}

/** .dockerignore as used here: ignore everything, then re-include listed paths. */
function allowedByDockerignore(patterns: string[], path: string): boolean {
  let allowed = true;
  for (const p of patterns) {
    const negated = p.startsWith('!');
    const pattern = (negated ? p.slice(1) : p).replace(/\/$/, '');
    const matches = pattern === '*' || path === pattern || path.startsWith(`${pattern}/`);
    if (matches) allowed = negated;
  }
  return allowed;
}

describe('Dockerfile', { timeout: 300_000 }, async () => {
  const dockerfile = instructions(await readFile(join(ROOT, 'Dockerfile'), 'utf8'));
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
    version: string;
    devDependencies: Record<string, string>;
  };

  it('builds on Node 24: the tested Node version for the build stage, distroless Node 24 to run', () => {
    const arg = dockerfile.find((i) => i.op === 'ARG' && i.args.startsWith('NODE_VERSION='));
    assert.equal(arg?.args, `NODE_VERSION=${pkg.devDependencies['node']}`, 'the image runs the Node the tests run on');
    assert.match(pkg.devDependencies['node']!, /^24\./);
    const bases = dockerfile.filter((i) => i.op === 'FROM').map((i) => i.args);
    assert.deepEqual(bases, [
      'node:${NODE_VERSION}-bookworm-slim AS build',
      'gcr.io/distroless/nodejs24-debian12:nonroot',
    ]);
  });

  it('copies only paths that exist and that .dockerignore lets into the context', async () => {
    const ignore = (await readFile(join(ROOT, '.dockerignore'), 'utf8'))
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    const fromContext = dockerfile.filter((i) => i.op === 'COPY' && !i.args.startsWith('--from='));
    assert.ok(fromContext.length >= 3);
    for (const copy of fromContext) {
      const sources = copy.args.split(/\s+/).slice(0, -1);
      for (const source of sources) {
        const path = source.replace(/^\.\//, '').replace(/\/$/, '');
        assert.ok(existsSync(join(ROOT, path)), `${path} exists`);
        assert.ok(allowedByDockerignore(ignore, path), `${path} is in the build context`);
      }
    }
    for (const excluded of ['node_modules', 'test', 'bench', '.git'])
      assert.equal(allowedByDockerignore(ignore, excluded), false, `${excluded} stays out of the context`);
  });

  it('runs as a non-root user with stateward as the entrypoint, the version baked in', () => {
    const runtime = finalStage(dockerfile);
    const user = runtime.findLast((i) => i.op === 'USER')?.args ?? '';
    assert.match(user, /^[1-9]\d*(:[1-9]\d*)?$/, 'a numeric non-root user (runAsNonRoot can verify it)');
    assert.equal(
      runtime.find((i) => i.op === 'ENTRYPOINT')?.args,
      '["/nodejs/bin/node", "--max-semi-space-size=4", "--expose-gc", "--no-memory-reducer", "--max-opt=2", "/app/bin/stateward.js"]',
    );
    assert.ok(
      runtime.some((i) => i.op === 'LABEL' && i.args.includes('org.opencontainers.image.version="${VERSION}"')),
    );
    const copied = runtime.filter((i) => i.op === 'COPY').map((i) => i.args.split(/\s+/)[1]);
    assert.deepEqual(
      copied,
      ['/app/dist/package.json', '/app/node_modules', '/app/dist/bin', '/app/dist/src'],
      'only the production install and the stripped build reach the runtime stage',
    );
    assert.ok(
      dockerfile.some((i) => i.op === 'RUN' && i.args.includes('npm ci --omit=dev')),
      'production dependencies only',
    );
  });

  it('its entrypoint starts from a production-only install, made as the build stage makes it', async () => {
    const app = await mkdtemp(join(tmpdir(), 'stateward-image-'));
    try {
      for (const path of ['package.json', 'package-lock.json', 'bin', 'src', 'scripts/build.ts'])
        await cp(join(ROOT, path), join(app, path), { recursive: true });
      await exec('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], {
        cwd: app,
        maxBuffer: 16 * 1024 * 1024,
      });
      assert.equal(existsSync(join(app, 'node_modules', 'fast-check')), false, 'no dev dependency installed');
      assert.equal(existsSync(join(app, 'node_modules', 'typescript')), false, 'no dev dependency installed');
      await exec('npm', ['pkg', 'set', 'version=9.9.9-test'], { cwd: app });
      // The tested Node 24 (the image's), from this repository's install.
      const node = join(ROOT, 'node_modules', '.bin', 'node');
      await exec(node, ['scripts/build.ts', 'dist'], { cwd: app });
      // The runtime stage's layout: the build's bin/, src/ and package.json beside node_modules.
      const image = join(app, 'image');
      for (const path of ['bin', 'src', 'package.json'])
        await cp(join(app, 'dist', path), join(image, path), { recursive: true });
      await cp(join(app, 'node_modules'), join(image, 'node_modules'), { recursive: true, verbatimSymlinks: true });
      assert.equal(existsSync(join(image, 'src', 'main.ts')), false, 'no TypeScript source in the image');
      const { stdout } = await exec(node, [join(image, 'bin', 'stateward.js'), '-version'], {
        cwd: '/',
        env: { PATH: '/usr/bin:/bin', NODE_ENV: 'production' },
      });
      assert.equal(stdout, 'stateward 9.9.9-test\n', 'the baked-in version');
      // -help loads every module the operator runs (they are imported statically).
      const help = await exec(node, [join(image, 'bin', 'stateward.js'), '-help'], {
        cwd: '/',
        env: { PATH: '/usr/bin:/bin' },
      }).catch((error: { stdout: string; stderr: string; code: number }) => error);
      assert.match(`${help.stdout}${help.stderr}`, /-config-restarts\.enabled/);
    } finally {
      await rm(app, { recursive: true, force: true });
    }
  });
});
