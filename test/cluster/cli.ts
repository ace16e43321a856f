// npm run cluster -- up|down|status|build
//
//   up      build if needed, start the local cluster in the background, print
//           KUBECONFIG=<path> once it is ready
//   down    stop it and remove its state
//   status  components, pids, apiserver health; exit 0 when it is up
//   build   only build (or find cached) binaries
//
// --real-node (up, build): also this machine's one real node (containerd,
// kubelet, kube-proxy; needs root), with Stateward's image built from the
// Dockerfile and loaded into it.
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureBinaries } from './build.ts';
import { clustersRoot, COMPONENTS, defaultClusterName, LocalCluster, reapStaleClusters, readState } from './cluster.ts';
import { ensurePauseImage, ensureStatewardImage } from './image.ts';
import { ensureNodeBinaries } from './nodebuild.ts';
import { NODE_COMPONENTS } from './realnode.ts';
import { controlRequest, serveControl } from './control.ts';
import { processAlive } from './lock.ts';
import { httpStatus, waitFor } from './probe.ts';

const usage = `usage: npm run cluster -- <up|down|status|build> [--name NAME] [--nodes-per-zone N] [--real-node]`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string', default: defaultClusterName() },
      'nodes-per-zone': { type: 'string', default: '2' },
      'real-node': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const command = positionals[0];
  if (values.help || !command) {
    console.log(usage);
    return command ? 0 : 2;
  }
  const name = values.name;
  const nodesPerZone = Number.parseInt(values['nodes-per-zone'], 10);
  if (!Number.isInteger(nodesPerZone) || nodesPerZone < 1) {
    console.error(`--nodes-per-zone must be a positive integer, got "${values['nodes-per-zone']}"`);
    return 2;
  }
  const realNode = values['real-node'];
  switch (command) {
    case 'build':
      await ensureBinaries({ log: (line) => console.error(line) });
      if (realNode) await buildRealNode();
      return 0;
    case 'up':
      return up(name, nodesPerZone, realNode);
    case 'serve':
      return serve(name, nodesPerZone, realNode);
    case 'down':
      return down(name);
    case 'status':
      return status(name);
    default:
      console.error(`unknown command "${command}"\n${usage}`);
      return 2;
  }
}

/** The real node's binaries, its sandbox image and Stateward's image. */
async function buildRealNode(): Promise<string> {
  const log = (line: string) => console.error(line);
  const binaries = await ensureNodeBinaries({ log });
  await ensurePauseImage(binaries.pause, { log });
  const image = await ensureStatewardImage({ log });
  console.error(
    `Stateward's image: ${image.name} (${(image.sizeBytes / 1024 / 1024).toFixed(0)} MiB, ${image.archive})`,
  );
  return image.name;
}

async function up(name: string, nodesPerZone: number, realNode: boolean): Promise<number> {
  const stateDir = join(clustersRoot(), name);
  const existing = readState(stateDir);
  if (existing?.ready && processAlive(existing.ownerPid)) {
    console.error(`cluster "${name}" is already running`);
    console.log(`KUBECONFIG=${existing.kubeconfig}`);
    return 0;
  }
  // Build in the foreground so progress and build errors reach the terminal.
  await ensureBinaries({ log: (line) => console.error(line) });
  const image = realNode ? await buildRealNode() : undefined;
  mkdirSync(clustersRoot(), { recursive: true });
  const supervisorLog = join(clustersRoot(), `${name}.supervisor.log`);
  const fd = openSync(supervisorLog, 'w');
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(import.meta.url),
      'serve',
      '--name',
      name,
      '--nodes-per-zone',
      String(nodesPerZone),
      ...(realNode ? ['--real-node'] : []),
    ],
    {
      detached: true,
      stdio: ['ignore', fd, fd],
    },
  );
  closeSync(fd);
  child.unref();
  const pid = child.pid;
  if (pid === undefined) {
    console.error(`could not start the cluster supervisor; log: ${supervisorLog}`);
    return 1;
  }
  try {
    const state = await waitFor(
      `cluster "${name}" to become ready`,
      () => {
        const state = readState(stateDir);
        return state?.ready && state.ownerPid === pid ? state : undefined;
      },
      {
        // A real node may wait for another cluster's to go (its own lock timeout).
        timeoutMs: realNode ? 900_000 : 180_000,
        intervalMs: 250,
        fail: () =>
          processAlive(pid)
            ? undefined
            : `the cluster failed to start:\n${tail(supervisorLog)}\n(full log: ${supervisorLog})`,
      },
    );
    console.error(
      `cluster "${name}" is up: ${state.nodes.length} nodes${state.realNode ? ` and the real node ${state.realNode.name}` : ''}, apiserver ${state.server}; logs in ${join(stateDir, 'logs')}`,
    );
    if (image && state.realNode)
      console.error(
        `Stateward's image ${image} is loaded on ${state.realNode.name}; pods run there with a toleration of stateward.dev/real-node and nodeSelector type=real (docs/local-cluster.md)`,
      );
    console.log(`KUBECONFIG=${state.kubeconfig}`);
    return 0;
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    if (processAlive(pid)) process.kill(pid, 'SIGTERM');
    return 1;
  }
}

async function serve(name: string, nodesPerZone: number, realNode: boolean): Promise<number> {
  const log = (line: string) => console.error(`[cluster] ${line}`);
  // Built by `up` in the foreground already: this finds it in the cache.
  const image = realNode ? await ensureStatewardImage({ log }) : undefined;
  const cluster = await LocalCluster.start({
    name,
    nodesPerZone,
    realNode,
    ...(image ? { realNodeImages: [image.archive] } : {}),
    log,
  });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    console.error('[cluster] shutting down');
    void cluster.teardown().then(() => process.exit(0));
  };
  await serveControl(cluster, stop);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGHUP', stop);
  return new Promise<number>(() => {
    // Runs until asked to stop; exit happens in stop().
  });
}

async function down(name: string): Promise<number> {
  const stateDir = join(clustersRoot(), name);
  const state = readState(stateDir);
  if (!state || !processAlive(state.ownerPid)) {
    await reapStaleClusters((line) => console.error(line));
    console.error(`cluster "${name}" is not running`);
    return 0;
  }
  try {
    await controlRequest(state.controlSocket, 'POST', '/shutdown', 10_000);
  } catch {
    process.kill(state.ownerPid, 'SIGTERM');
  }
  await waitFor(`cluster "${name}" (pid ${state.ownerPid}) to stop`, () => !processAlive(state.ownerPid), {
    timeoutMs: 60_000,
  });
  console.error(`cluster "${name}" stopped`);
  return 0;
}

async function status(name: string): Promise<number> {
  const stateDir = join(clustersRoot(), name);
  const state = readState(stateDir);
  if (!state || !processAlive(state.ownerPid)) {
    console.log(`cluster "${name}": not running`);
    return 3;
  }
  const live = await controlRequest<typeof state>(state.controlSocket, 'GET', '/state', 5000).catch(() => state);
  const kubeconfig = readFileSync(state.kubeconfig, 'utf8');
  const b64 = (key: string) =>
    Buffer.from(new RegExp(`${key}: (\\S+)`).exec(kubeconfig)?.[1] ?? '', 'base64').toString();
  const readyz = await httpStatus(`${state.server}/readyz`, {
    ca: b64('certificate-authority-data'),
    cert: b64('client-certificate-data'),
    key: b64('client-key-data'),
  });
  console.log(`cluster "${name}": ${readyz === 200 ? 'up' : `apiserver not ready (${readyz ?? 'unreachable'})`}`);
  console.log(`  KUBECONFIG=${state.kubeconfig}`);
  console.log(`  apiserver  ${state.server}`);
  console.log(
    `  kubernetes ${state.versions.KUBERNETES_VERSION}, etcd ${state.versions.ETCD_VERSION}, kwok ${state.versions.KWOK_VERSION}`,
  );
  for (const component of [...COMPONENTS, ...(live.realNode ? NODE_COMPONENTS : [])]) {
    const info = live.components[component];
    const alive = info?.pid !== undefined && processAlive(info.pid);
    console.log(`  ${component.padEnd(19)} ${alive ? `running (pid ${info.pid})` : 'stopped'}  ${info?.log ?? ''}`);
  }
  console.log(`  nodes: ${state.nodes.map((n) => `${n.name} (${n.zone})`).join(', ')}`);
  if (live.realNode)
    console.log(
      `  real node: ${live.realNode.name} (${live.realNode.ip}), pods ${live.realNode.podCidr} on ${live.realNode.bridge}, containerd ${live.realNode.containerdSocket}`,
    );
  return readyz === 200 ? 0 : 1;
}

function tail(path: string, lines = 20): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exitCode = 1;
  },
);
