// The images the real node runs, built on this machine because no image
// registry is reachable: the sandbox ("pause") image from Kubernetes'
// pause.c, and Stateward's image from the project's own Dockerfile, built by
// buildah (daemonless, Debian's) with --pull=never against two local base
// images that stand in for the public ones under the exact names the
// Dockerfile uses:
//
//   docker.io/library/node:<NODE_VERSION>-bookworm-slim
//       debootstrap's bookworm minbase + this project's Node binary + npm,
//       laid out as the official image (/usr/local/bin/node)
//   gcr.io/distroless/nodejs24-debian12:nonroot
//       /nodejs/bin/node, the glibc and libstdc++ it links against from the
//       same bookworm root, CA certificates, passwd/group with nonroot
//       (65532), user 65532, working directory /home/nonroot
//
// Everything is cached under ~/.cache/stateward/realnode/: the bookworm root
// (by suite), the bases (by Node version, npm version and this recipe), and
// every image as a docker-archive tar for `ctr images import`, Stateward's
// by a content hash of the Dockerfile, the files it copies and the bases.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import {
  chmod,
  chown,
  copyFile,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot } from './build.ts';
import { acquireLock } from './lock.ts';
import { imageBuildProblems } from './realnode-host.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** Bump when the way the bases are made changes: they are rebuilt. */
const BASES_RECIPE = 'bases-1';
const DEBIAN_SUITE = 'bookworm';
const DEBIAN_MIRROR = 'http://deb.debian.org/debian';
export const PAUSE_IMAGE_REPOSITORY = 'localhost/stateward/pause';
export const STATEWARD_IMAGE_REPOSITORY = 'localhost/stateward/stateward';

export interface BuiltImage {
  /** The reference pods name, e.g. localhost/stateward/stateward:local-0123456789ab. */
  name: string;
  /** docker-archive tar, for `ctr images import`. */
  archive: string;
  /** Bytes of the archive: the image's uncompressed layers and config. */
  sizeBytes: number;
  /** Milliseconds spent building now; 0 when it came from the cache. */
  buildMs: number;
}

export function imagesDir(): string {
  return join(cacheRoot(), 'realnode', 'images');
}

/**
 * buildah's containers.conf: its CNI configuration directory (where it keeps
 * a lock file even for --network=host) under ours instead of /etc/cni/net.d.
 */
async function buildahEnv(): Promise<Record<string, string>> {
  const dir = join(cacheRoot(), 'realnode', 'buildah');
  const conf = join(dir, 'containers.conf');
  const text = `[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "${join(dir, 'cni')}"\ncni_plugin_dirs = ["/usr/lib/cni"]\n`;
  await mkdir(join(dir, 'cni'), { recursive: true });
  if (!existsSync(conf) || (await readFile(conf, 'utf8')) !== text) await writeFile(conf, text);
  return { CONTAINERS_CONF: conf };
}

/** buildah with the project's own storage, apart from any system-wide one. */
function buildahArgs(): string[] {
  const root = join(cacheRoot(), 'realnode', 'buildah', 'storage');
  return [
    '--root',
    root,
    // Lock files and mount state, one directory per storage root: /run, where a reboot clears them.
    '--runroot',
    `/run/stateward-buildah-${createHash('sha256').update(root).digest('hex').slice(0, 12)}`,
    '--storage-driver',
    'overlay',
  ];
}

interface Logged {
  log: (line: string) => void;
  logPath: string;
}

/** Runs a command, its output appended to the build log; stdout returned. Fails with the log's tail. */
async function step(
  what: string,
  command: string,
  args: string[],
  out: Logged,
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<string> {
  const logStream = createWriteStream(out.logPath, { flags: 'a' });
  logStream.write(`$ ${command} ${args.join(' ')}\n`);
  let stdout = '';
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? repoRoot,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      logStream.write(chunk);
    });
    child.stderr.pipe(logStream, { end: false });
    child.on('error', reject);
    child.on('close', (exitCode) => resolve(exitCode ?? 1));
  }).catch((error: unknown) => {
    throw new Error(`${what}: cannot run ${command}: ${String(error)}`);
  });
  await new Promise<void>((resolve) => logStream.end(resolve));
  if (code !== 0) {
    const tail = (await readFile(out.logPath, 'utf8')).trimEnd().split('\n').slice(-15).join('\n');
    throw new Error(`${what} failed (${command} exit ${code}); full log: ${out.logPath}\n${tail}`);
  }
  return stdout;
}

const buildah = async (what: string, args: string[], out: Logged, options: { cwd?: string } = {}) =>
  step(what, 'buildah', [...buildahArgs(), ...args], out, { ...options, env: await buildahEnv() });

async function imageExists(name: string): Promise<boolean> {
  const env = { ...process.env, ...(await buildahEnv()) };
  return new Promise((resolve) => {
    const child = spawn('buildah', [...buildahArgs(), 'inspect', '--type', 'image', name], { stdio: 'ignore', env });
    child.on('error', () => resolve(false));
    child.on('close', (code) => resolve(code === 0));
  });
}

async function withLock<T>(name: string, log: (line: string) => void, body: () => Promise<T>): Promise<T> {
  // Only a build needs buildah and friends: a cached image needs nothing.
  const problems = await imageBuildProblems();
  if (problems.length > 0) throw new Error(`cannot build ${name}:\n- ${problems.join('\n- ')}`);
  await mkdir(imagesDir(), { recursive: true });
  const release = await acquireLock(join(imagesDir(), `.${name}.lock`), {
    waitingMessage: () => log(`waiting for another build of ${name} in ${imagesDir()}`),
  });
  try {
    return await body();
  } finally {
    await release();
  }
}

async function sha256File(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

/** The Node the tests run on: the `node` devDependency, the version the Dockerfile's NODE_VERSION names. */
async function nodeForBases(): Promise<{ binary: string; version: string; npmDir: string; npmVersion: string }> {
  const dockerfile = await readFile(join(repoRoot, 'Dockerfile'), 'utf8');
  const version = /^ARG NODE_VERSION=(\S+)$/m.exec(dockerfile)?.[1];
  if (!version) throw new Error('Dockerfile: no `ARG NODE_VERSION=` line');
  const candidates = [process.execPath, join(repoRoot, 'node_modules', 'node', 'bin', 'node')];
  let binary: string | undefined;
  for (const candidate of candidates) {
    if (!existsSync(candidate)) continue;
    const out = await step('node --version', candidate, ['--version'], { log: () => {}, logPath: '/dev/null' });
    if (out.trim() === `v${version}`) {
      binary = candidate;
      break;
    }
  }
  if (!binary) throw new Error(`no Node v${version} (the Dockerfile's NODE_VERSION) among ${candidates.join(', ')}`);
  // npm: the one this machine runs (the official image bundles Node's own; any npm 11 installs a lockfile v3).
  const npmCli = await step('which npm', 'sh', ['-c', 'readlink -f "$(command -v npm)"'], {
    log: () => {},
    logPath: '/dev/null',
  });
  const npmDir = dirname(dirname(npmCli.trim()));
  const npmVersion = (JSON.parse(await readFile(join(npmDir, 'package.json'), 'utf8')) as { version: string }).version;
  return { binary, version, npmDir, npmVersion };
}

/** Debian's bookworm minbase (debootstrap), with CA certificates; cached by suite. */
async function ensureRootfs(out: Logged): Promise<string> {
  const root = join(cacheRoot(), 'realnode', 'rootfs', `${DEBIAN_SUITE}-minbase`);
  if (existsSync(join(root, 'bin', 'sh'))) return root;
  const partial = `${root}.partial`;
  await rm(partial, { recursive: true, force: true });
  await mkdir(dirname(root), { recursive: true });
  out.log(`debootstrap ${DEBIAN_SUITE} minbase (log: ${out.logPath})`);
  await step(
    'debootstrap',
    'debootstrap',
    ['--variant=minbase', '--include=ca-certificates', DEBIAN_SUITE, partial, DEBIAN_MIRROR],
    out,
  );
  await step(
    'trim the root',
    'sh',
    ['-c', 'rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*', '-', partial],
    out,
  );
  await rename(partial, root);
  return root;
}

/** Builds a container from scratch: mount, fill, unmount, configure, commit under `name`. */
async function fromScratch(
  name: string,
  out: Logged,
  fill: (mountPoint: string) => Promise<void>,
  config: string[],
): Promise<void> {
  const container = (await buildah(`buildah from scratch (${name})`, ['from', 'scratch'], out)).trim();
  try {
    const mountPoint = (await buildah(`buildah mount (${name})`, ['mount', container], out)).trim();
    try {
      await fill(mountPoint);
    } finally {
      await buildah(`buildah umount (${name})`, ['umount', container], out);
    }
    await buildah(
      `buildah config (${name})`,
      ['config', ...config, '--os', 'linux', '--arch', 'amd64', container],
      out,
    );
    await buildah(`buildah commit (${name})`, ['commit', '-q', container, name], out);
  } finally {
    await buildah(`buildah rm (${name})`, ['rm', container], out);
  }
}

/** The two local stand-ins for the Dockerfile's public base images. */
export async function ensureBaseImages(
  options: { log?: (line: string) => void } = {},
): Promise<{ names: string[]; key: string; buildMs: number }> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const node = await nodeForBases();
  const key = createHash('sha256')
    .update(
      `${BASES_RECIPE} ${DEBIAN_SUITE} node ${node.version} ${await sha256File(node.binary)} npm ${node.npmVersion}`,
    )
    .digest('hex')
    .slice(0, 12);
  const names = [`docker.io/library/node:${node.version}-bookworm-slim`, 'gcr.io/distroless/nodejs24-debian12:nonroot'];
  const marker = join(imagesDir(), `bases-${key}.json`);
  const present = async () => existsSync(marker) && (await Promise.all(names.map(imageExists))).every(Boolean);
  if (await present()) return { names, key, buildMs: 0 };
  return withLock('bases', log, async () => {
    if (await present()) return { names, key, buildMs: 0 };
    const started = Date.now();
    const out: Logged = { log, logPath: join(imagesDir(), 'build-bases.log') };
    await writeFile(out.logPath, '');
    const rootfs = await ensureRootfs(out);
    log(`building the base images ${names.join(', ')} (log: ${out.logPath})`);

    await fromScratch(
      names[0]!,
      out,
      async (m) => {
        await step('copy the bookworm root', 'cp', ['-a', `${rootfs}/.`, `${m}/`], out);
        await mkdir(join(m, 'usr/local/bin'), { recursive: true });
        await mkdir(join(m, 'usr/local/lib/node_modules'), { recursive: true });
        await mkdir(join(m, 'usr/local/etc'), { recursive: true });
        await copyFile(node.binary, join(m, 'usr/local/bin/node'));
        await chmod(join(m, 'usr/local/bin/node'), 0o755);
        await step('copy npm', 'cp', ['-a', node.npmDir, join(m, 'usr/local/lib/node_modules/npm')], out);
        await symlink('../lib/node_modules/npm/bin/npm-cli.js', join(m, 'usr/local/bin/npm'));
        await symlink('../lib/node_modules/npm/bin/npx-cli.js', join(m, 'usr/local/bin/npx'));
        // npm trusts the system bundle, which a build behind a TLS-intercepting proxy
        // replaces by the host's (mounted read-only for the build only; see buildStatewardImage).
        await writeFile(join(m, 'usr/local/etc/npmrc'), 'cafile=/etc/ssl/certs/ca-certificates.crt\n');
      },
      [
        '--env',
        `NODE_VERSION=${node.version}`,
        '--env',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--cmd',
        '["node"]',
      ],
    );

    const libraries = (await step('ldd node', 'ldd', [node.binary], out))
      .split('\n')
      .map((line) => /=>\s*(\S+)/.exec(line)?.[1] ?? /^\s*(\/\S*ld-linux\S*)/.exec(line)?.[1])
      .filter((path): path is string => path !== undefined && path.startsWith('/'))
      .map((path) => basename(path));
    await fromScratch(
      names[1]!,
      out,
      async (m) => {
        for (const d of [
          'etc/ssl/certs',
          'tmp',
          'home/nonroot',
          'nodejs/bin',
          'lib/x86_64-linux-gnu',
          'lib64',
          'usr/share',
        ]) {
          await mkdir(join(m, d), { recursive: true });
        }
        await chmod(join(m, 'tmp'), 0o1777);
        await chown(join(m, 'home/nonroot'), 65532, 65532);
        await copyFile(node.binary, join(m, 'nodejs/bin/node'));
        await chmod(join(m, 'nodejs/bin/node'), 0o755);
        for (const lib of libraries) {
          const source = [join(rootfs, 'usr/lib/x86_64-linux-gnu', lib), join(rootfs, 'lib64', lib)].find((p) =>
            existsSync(p),
          );
          if (!source)
            throw new Error(`${lib}, which node links against, is not in the ${DEBIAN_SUITE} root ${rootfs}`);
          // cp -L: the root's files are symlinks into /usr/lib.
          const target = lib.startsWith('ld-linux') ? join(m, 'lib64', lib) : join(m, 'lib/x86_64-linux-gnu', lib);
          await step(`copy ${lib}`, 'cp', ['-L', source, target], out);
        }
        await step(
          'copy CA certificates',
          'cp',
          ['-L', join(rootfs, 'etc/ssl/certs/ca-certificates.crt'), join(m, 'etc/ssl/certs/')],
          out,
        );
        await writeFile(
          join(m, 'etc/passwd'),
          'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n',
        );
        await writeFile(join(m, 'etc/group'), 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n');
        await writeFile(join(m, 'etc/nsswitch.conf'), 'hosts: files dns\n');
      },
      [
        '--user',
        '65532',
        '--workingdir',
        '/home/nonroot',
        '--entrypoint',
        '["/nodejs/bin/node"]',
        '--env',
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        '--env',
        'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt',
      ],
    );
    const buildMs = Date.now() - started;
    await writeFile(marker, JSON.stringify({ names, key, node, buildMs, builtAt: new Date().toISOString() }, null, 2));
    log(`base images ready in ${(buildMs / 1000).toFixed(0)} s`);
    return { names, key, buildMs };
  });
}

/** Saves an image of buildah's storage as a docker-archive tar (written aside, then renamed). */
async function saveArchive(name: string, archive: string, out: Logged): Promise<number> {
  await rm(`${archive}.tmp`, { force: true });
  await buildah(`save ${name}`, ['push', '-q', name, `docker-archive:${archive}.tmp:${name}`], out);
  await rename(`${archive}.tmp`, archive);
  return (await stat(archive)).size;
}

/** The sandbox image: Kubernetes' pause binary (built with the node's binaries), alone. */
export async function ensurePauseImage(
  pauseBinary: string,
  options: { log?: (line: string) => void } = {},
): Promise<BuiltImage> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const key = (await sha256File(pauseBinary)).slice(0, 12);
  const name = `${PAUSE_IMAGE_REPOSITORY}:${key}`;
  const archive = join(imagesDir(), `pause-${key}.tar`);
  if (existsSync(archive)) return { name, archive, sizeBytes: (await stat(archive)).size, buildMs: 0 };
  return withLock('pause', log, async () => {
    if (existsSync(archive)) return { name, archive, sizeBytes: (await stat(archive)).size, buildMs: 0 };
    const started = Date.now();
    const out: Logged = { log, logPath: join(imagesDir(), 'build-pause.log') };
    await writeFile(out.logPath, '');
    await fromScratch(
      name,
      out,
      async (m) => {
        await copyFile(pauseBinary, join(m, 'pause'));
        await chmod(join(m, 'pause'), 0o755);
      },
      ['--entrypoint', '["/pause"]', '--user', '65535:65535'],
    );
    const sizeBytes = await saveArchive(name, archive, out);
    return { name, archive, sizeBytes, buildMs: Date.now() - started };
  });
}

/** What the Dockerfile's build context holds after .dockerignore: the files it can copy. */
async function contextFiles(): Promise<string[]> {
  const ignore = await readFile(join(repoRoot, '.dockerignore'), 'utf8');
  const lines = ignore
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  // The project's .dockerignore excludes everything (`*`) and re-includes entries
  // (`!name`); anything else would need a real matcher: refuse rather than guess.
  if (lines[0] !== '*' || !lines.slice(1).every((l) => l.startsWith('!')))
    throw new Error(
      `.dockerignore is no longer "*" followed by "!entry" lines; teach test/cluster/image.ts its patterns`,
    );
  const files: string[] = [];
  const walk = async (path: string): Promise<void> => {
    const info = await stat(path);
    if (info.isDirectory()) {
      for (const entry of (await readdir(path)).sort()) await walk(join(path, entry));
    } else if (info.isFile()) {
      files.push(path);
    }
  };
  for (const entry of lines.slice(1).map((l) => l.slice(1).replace(/\/$/, ''))) {
    if (existsSync(join(repoRoot, entry))) await walk(join(repoRoot, entry));
  }
  return files;
}

/** Content hash of the Dockerfile, .dockerignore, every file of the context (path, mode, bytes) and the bases. */
export async function statewardImageKey(basesKey: string): Promise<string> {
  const hash = createHash('sha256').update(`bases ${basesKey}\n`);
  for (const file of ['Dockerfile', '.dockerignore']) hash.update(file).update(await readFile(join(repoRoot, file)));
  for (const file of await contextFiles()) {
    const info = await stat(file);
    hash.update(`${relative(repoRoot, file)} ${info.mode & 0o111 ? 'x' : '-'} ${info.size}\n`);
    hash.update(await readFile(file));
  }
  return hash.digest('hex').slice(0, 12);
}

/**
 * Stateward's image from the project's Dockerfile, exactly as a user builds
 * it (no build arguments: the production defaults name the base images,
 * which exist locally under those names), cached by content hash.
 */
export async function ensureStatewardImage(options: { log?: (line: string) => void } = {}): Promise<BuiltImage> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const bases = await ensureBaseImages({ log });
  const key = await statewardImageKey(bases.key);
  const name = `${STATEWARD_IMAGE_REPOSITORY}:local-${key}`;
  const archive = join(imagesDir(), `stateward-${key}.tar`);
  if (existsSync(archive)) return { name, archive, sizeBytes: (await stat(archive)).size, buildMs: 0 };
  return withLock('stateward', log, async () => {
    if (existsSync(archive)) return { name, archive, sizeBytes: (await stat(archive)).size, buildMs: 0 };
    const started = Date.now();
    const out: Logged = { log, logPath: join(imagesDir(), 'build-stateward.log') };
    await writeFile(out.logPath, '');
    log(`building ${name} from ./Dockerfile with buildah (log: ${out.logPath})`);
    // npm ci in the build stage reaches the registry through this machine's
    // network; behind a TLS-intercepting proxy it needs this machine's CA
    // bundle, mounted read-only for RUN steps only (the image keeps Debian's).
    const hostCa = '/etc/ssl/certs/ca-certificates.crt';
    await buildah(
      `buildah bud ./Dockerfile`,
      [
        'bud',
        '--pull=never',
        '--network=host',
        '--layers',
        ...(existsSync(hostCa) ? ['-v', `${hostCa}:${hostCa}:ro`] : []),
        '-t',
        name,
        '-f',
        join(repoRoot, 'Dockerfile'),
        repoRoot,
      ],
      out,
    );
    const sizeBytes = await saveArchive(name, archive, out);
    // Keep this build's archive and image; older Stateward builds go (the layers
    // they share with this one stay).
    for (const entry of await readdir(imagesDir())) {
      if (/^stateward-[0-9a-f]{12}\.tar$/.test(entry) && entry !== basename(archive))
        await rm(join(imagesDir(), entry), { force: true });
    }
    const tags = (await buildah('list images', ['images', '--format', '{{.Name}}:{{.Tag}}'], out))
      .split('\n')
      .filter((tag) => tag.startsWith(`${STATEWARD_IMAGE_REPOSITORY}:`) && tag !== name);
    if (tags.length > 0) await buildah('remove older Stateward images', ['rmi', ...tags], out);
    // The layer cache (--layers): --prune drops the intermediate images of older
    // builds and keeps this one's, so the next build still finds its npm ci layer.
    await buildah('prune older intermediate images', ['rmi', '--prune'], out);
    const buildMs = Date.now() - started;
    log(`${name} built in ${(buildMs / 1000).toFixed(0)} s (${(sizeBytes / 1024 / 1024).toFixed(0)} MiB)`);
    return { name, archive, sizeBytes, buildMs };
  });
}
