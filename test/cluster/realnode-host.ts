// The machine side of the real node (realnode.ts): what it needs from this
// machine, the machine-wide lock (one real node per machine: port 10250,
// kube-proxy's iptables chains, the bridge, /var/lib and /run directories),
// and the cleanup that removes whatever a real node changed outside its own
// directories, whether its owner tore it down or died: processes, pods,
// mounts, network namespaces, interfaces, iptables chains, cgroups, sysctls
// and the few files the kubelet writes at fixed paths.
import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { mkdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cacheRoot } from './build.ts';
import { processAlive } from './lock.ts';
import type { NodeBinaries } from './nodebuild.ts';
import { waitFor } from './probe.ts';

const exec = promisify(execFile);

/** The node's fixed names and addresses: there is one per machine. */
export const REAL_NODE = {
  name: 'stateward-real-node',
  /** Pods tolerate this taint to run on the real node (nothing else lands there). */
  taint: { key: 'stateward.dev/real-node', value: 'true', effect: 'NoSchedule' },
  labels: { type: 'real', 'stateward.dev/real-node': 'true' },
  bridge: 'stateward0',
  podCidr: '10.244.0.0/24',
  gateway: '10.244.0.1',
  cniNetwork: 'stateward-real-node',
  /** Persistent state: containerd's root (images, snapshots), the kubelet's root, pod logs, IPAM. */
  varDir: '/var/lib/stateward-real-node',
  /** Runtime state: sockets, containerd's state, runc's root, network namespaces, saved sysctls. */
  runDir: '/run/stateward-real-node',
  /** Machine-wide: the owner's pid inside. */
  lockDir: '/run/stateward-real-node.lock',
  endpointSlice: 'kubernetes-stateward-real-node',
} as const;

/** Sysctls the node needs on the machine; their earlier values come back at teardown. */
export const HOST_SYSCTLS: Record<string, string> = {
  // pod -> ClusterIP -> another pod on the bridge is routed (DNAT) back out of it
  'net.ipv4.ip_forward': '1',
  // bridged pod-to-pod traffic passes kube-proxy's rules (replies are un-DNATed)
  'net.bridge.bridge-nf-call-iptables': '1',
};
export const CNI_BIN_DIR = '/usr/lib/cni';
/**
 * Paths the kubelet uses whatever its --root-dir: the device plugins' socket
 * directory and the /var/log/containers symlinks to pod logs (parents first).
 */
export const KUBELET_FIXED_DIRS = ['/var/lib/kubelet', '/var/lib/kubelet/device-plugins', '/var/log/containers'];

/** Who owns the machine's real node, in <runDir>/owner.json. */
export interface Owner {
  pid: number;
  cluster: string;
  stateDir: string;
  /** The node binaries' directory: every process started from it is ours. */
  binDir: string;
  /** Those of KUBELET_FIXED_DIRS that existed before the node started. */
  preexisting: string[];
}

// ---- preconditions -------------------------------------------------------

async function commandExists(command: string): Promise<boolean> {
  try {
    await exec('sh', ['-c', `command -v ${command}`]);
    return true;
  } catch {
    return false;
  }
}

/** Every reason this machine cannot run the real node, each with what to do; empty when it can. */
export async function realNodeProblems(): Promise<string[]> {
  const problems: string[] = [];
  if (process.platform !== 'linux') return [`the real node runs on Linux only (this is ${process.platform})`];
  if (process.getuid?.() !== 0)
    problems.push(
      'the real node needs root (it mounts, creates network interfaces, writes iptables rules and cgroups)',
    );
  const v1 = ['cpu', 'memory', 'pids'].every((c) => existsSync(`/sys/fs/cgroup/${c}/cgroup.procs`));
  const v2 = (() => {
    try {
      const controllers = readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8').split(/\s+/);
      return ['cpu', 'memory', 'pids'].every((c) => controllers.includes(c));
    } catch {
      return false;
    }
  })();
  if (!v1 && !v2)
    problems.push(
      'no cgroup hierarchy with the cpu, memory and pids controllers under /sys/fs/cgroup (v1 per-controller mounts or v2 unified)',
    );
  if (!readFileSync('/proc/filesystems', 'utf8').includes('\toverlay\n'))
    problems.push("the kernel has no overlay filesystem (containerd's snapshotter needs it): modprobe overlay");
  if (!existsSync('/proc/sys/net/bridge/bridge-nf-call-iptables'))
    problems.push(
      'bridge netfilter is not loaded (kube-proxy needs it for pod-to-Service traffic): modprobe br_netfilter',
    );
  const apt: Record<string, string> = {
    runc: 'runc',
    iptables: 'iptables',
    'iptables-save': 'iptables',
    'iptables-restore': 'iptables',
    ip: 'iproute2',
    unshare: 'util-linux',
    sysctl: 'procps',
    mount: 'mount',
    umount: 'mount',
  };
  const missing = new Set<string>();
  for (const [command, pkg] of Object.entries(apt)) if (!(await commandExists(command))) missing.add(pkg);
  for (const plugin of ['bridge', 'host-local', 'loopback'])
    if (!existsSync(join(CNI_BIN_DIR, plugin))) missing.add('containernetworking-plugins');
  if (missing.size > 0)
    problems.push(`missing Debian packages: apt-get install ${[...missing].sort().join(' ')} (.ci/run installs them)`);
  return problems;
}

/** The image builder's own needs (root, buildah, debootstrap, a static glibc), checked where images are built. */
export async function imageBuildProblems(): Promise<string[]> {
  const problems: string[] = [];
  if (process.getuid?.() !== 0)
    problems.push("building the real node's images needs root (buildah's storage, debootstrap)");
  const missing: string[] = [];
  for (const command of ['buildah', 'debootstrap', 'gcc']) if (!(await commandExists(command))) missing.push(command);
  if (missing.length > 0)
    problems.push(
      `missing commands to build the real node's images: ${missing.join(', ')} (apt-get install buildah debootstrap gcc libc6-dev; .ci/run installs them)`,
    );
  return problems;
}

// ---- small helpers -------------------------------------------------------

export async function run(
  command: string,
  args: string[],
  options: { timeoutMs?: number; input?: string } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = options.timeoutMs
      ? setTimeout(() => {
          child.kill('SIGKILL');
          stderr += `\n(killed after ${options.timeoutMs} ms)`;
        }, options.timeoutMs)
      : undefined;
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${command}: ${error.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${stderr.trim()}`));
    });
    if (child.stdin) {
      child.stdin.on('error', () => undefined); // a command that exits without reading its input
      child.stdin.end(options.input);
    }
  });
}

export async function tryRun(command: string, args: string[], options: { timeoutMs?: number; input?: string } = {}) {
  try {
    return { ok: true, out: await run(command, args, options) };
  } catch (error) {
    return { ok: false, out: error instanceof Error ? error.message : String(error) };
  }
}

/** The machine's IPv4 address on its default route: what a kubelet reports as InternalIP. */
export async function primaryIPv4(): Promise<string> {
  const out = await tryRun('ip', ['-4', '-o', 'route', 'get', '1.1.1.1']);
  const ip = / src (\d+\.\d+\.\d+\.\d+)/.exec(out.out)?.[1];
  if (!out.ok || !ip) throw new Error(`cannot find this machine's IPv4 address on its default route: ${out.out}`);
  return ip;
}

export function readOwner(): Owner | undefined {
  try {
    return JSON.parse(readFileSync(join(REAL_NODE.runDir, 'owner.json'), 'utf8')) as Owner;
  } catch {
    return undefined;
  }
}

function lockOwnerPid(): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(join(REAL_NODE.lockDir, 'pid'), 'utf8'), 10);
    return Number.isInteger(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The machine-wide lock (a directory with the owner's pid, as lock.ts's):
 * waits up to timeoutMs for a live owner, breaks a dead one's.
 */
export async function acquireMachineLock(timeoutMs: number, log: (line: string) => void): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let told = false;
  await mkdir('/run', { recursive: true });
  for (;;) {
    try {
      await mkdir(REAL_NODE.lockDir);
      await writeFile(join(REAL_NODE.lockDir, 'pid'), String(process.pid));
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const pid = lockOwnerPid();
    if (pid === process.pid) return;
    if (pid !== undefined && !processAlive(pid)) {
      await rm(REAL_NODE.lockDir, { recursive: true, force: true });
      continue;
    }
    if (pid === undefined) {
      // No pid yet: its owner is between mkdir and writing it, or died right there.
      let age = 0;
      try {
        age = Date.now() - statSync(REAL_NODE.lockDir).mtimeMs;
      } catch {
        continue; // gone meanwhile
      }
      if (age > 5000) {
        await rm(REAL_NODE.lockDir, { recursive: true, force: true });
        continue;
      }
    }
    const owner = readOwner();
    if (Date.now() >= deadline)
      throw new Error(
        `this machine's real node is in use by pid ${pid}${owner ? ` (cluster "${owner.cluster}")` : ''}; one machine runs one real node (port 10250, kube-proxy's iptables chains); stop that cluster or wait`,
      );
    if (!told) {
      log(`waiting for this machine's real node, in use by pid ${pid}${owner ? ` (cluster "${owner.cluster}")` : ''}`);
      told = true;
    }
    // Waiting on another process, not on our own condition.
    await new Promise((resolve) => setTimeout(resolve, pid === undefined ? 100 : 1000));
  }
}

export async function releaseMachineLock(): Promise<void> {
  if (lockOwnerPid() === process.pid) await rm(REAL_NODE.lockDir, { recursive: true, force: true });
}

/** Records the owner and which of the kubelet's fixed directories exist already (teardown keeps those). */
export async function recordOwner(owner: Omit<Owner, 'preexisting'>): Promise<void> {
  const preexisting = KUBELET_FIXED_DIRS.filter((dir) => existsSync(dir));
  await mkdir(REAL_NODE.runDir, { recursive: true });
  await writeFile(join(REAL_NODE.runDir, 'owner.json'), JSON.stringify({ ...owner, preexisting }, null, 2));
}

/** Sets the sysctls the node needs, saving their values first (once: a second start keeps the first save). */
export async function applyHostSysctls(): Promise<void> {
  const saved = join(REAL_NODE.runDir, 'sysctl.orig');
  if (!existsSync(saved)) {
    const lines: string[] = [];
    for (const key of Object.keys(HOST_SYSCTLS)) lines.push(`${key}=${(await run('sysctl', ['-n', key])).trim()}`);
    await writeFile(saved, `${lines.join('\n')}\n`);
  }
  for (const [key, value] of Object.entries(HOST_SYSCTLS)) await run('sysctl', ['-qw', `${key}=${value}`]);
}

// ---- cleanup ---------------------------------------------------------------

/** Refuses to start next to a Kubernetes node we do not own: its kube-proxy's chains would be ours to delete. */
export async function refuseForeignKubernetes(): Promise<void> {
  const rules = await tryRun('iptables-save', []);
  if (rules.ok && /^:KUBE-/m.test(rules.out))
    throw new Error(
      'this machine already has KUBE-* iptables chains that no real node of ours left behind: another Kubernetes node (kubelet, kube-proxy) seems to run here; the real node would take them over and delete them at teardown',
    );
  const port = await tryRun('sh', ['-c', 'cat /proc/net/tcp /proc/net/tcp6 | awk \'$4 == "0A" {print $2}\'']);
  for (const [port_, what] of [
    [10250, 'kubelet'],
    [10248, 'kubelet healthz'],
    [10256, 'kube-proxy healthz'],
    [10249, 'kube-proxy metrics'],
  ] as const) {
    const hex = `:${port_.toString(16).toUpperCase().padStart(4, '0')}`;
    if (port.ok && port.out.split('\n').some((local) => local.endsWith(hex)))
      throw new Error(
        `port ${port_} (${what}) is already in use on this machine: is another kubelet or kube-proxy running?`,
      );
  }
}

/**
 * From `iptables-save` output: per table, an `iptables-restore --noflush`
 * script that deletes every rule of another chain jumping to a KUBE-* chain,
 * then flushes and deletes the KUBE-* chains. iptables-save quotes rules the
 * way iptables-restore reads them, so each rule is deleted exactly as saved.
 */
export function kubeChainRemoval(saved: string): { table: string; chains: string[]; script: string }[] {
  let table = '';
  const owned = new Map<string, string[]>();
  const jumps = new Map<string, string[]>();
  for (const line of saved.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1);
    const chain = /^:(KUBE-\S+)/.exec(line)?.[1];
    if (chain) owned.set(table, [...(owned.get(table) ?? []), chain]);
    const rule = /^-A (\S+) (.*)$/.exec(line);
    if (rule && !rule[1]!.startsWith('KUBE-') && /(^| )-[jg] KUBE-/.test(rule[2]!))
      jumps.set(table, [...(jumps.get(table) ?? []), `-D ${rule[1]} ${rule[2]}`]);
  }
  return [...owned].map(([t, chains]) => ({
    table: t,
    chains,
    script: [
      `*${t}`,
      ...(jumps.get(t) ?? []),
      ...chains.map((c) => `-F ${c}`),
      ...chains.map((c) => `-X ${c}`),
      'COMMIT',
      '',
    ].join('\n'),
  }));
}

/** Removes KUBE-* chains and the jumps to them (kube-proxy --cleanup leaves the kubelet's canaries). */
async function removeKubeChains(family: 'iptables' | 'ip6tables', log: (line: string) => void): Promise<void> {
  const saved = await tryRun(`${family}-save`, []);
  if (!saved.ok) return;
  const removed: string[] = [];
  for (const { table, chains, script } of kubeChainRemoval(saved.out)) {
    const restored = await tryRun(`${family}-restore`, ['--noflush'], { input: script });
    if (restored.ok) removed.push(`${table} ${chains.join(' ')}`);
    else log(`could not remove KUBE-* chains from ${family} table ${table}: ${restored.out}`);
  }
  if (removed.length > 0) log(`removed from ${family}: ${removed.join('; ')}`);
}

function mountsUnder(prefixes: string[]): string[] {
  const mounts: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const mountPoint = line.split(' ')[4];
    if (mountPoint && prefixes.some((p) => mountPoint === p || mountPoint.startsWith(`${p}/`))) mounts.push(mountPoint);
  }
  // Deepest first, each once.
  return [...new Set(mounts)].sort((a, b) => b.length - a.length);
}

function cgroupRoots(): string[] {
  try {
    const roots = readdirSync('/sys/fs/cgroup', { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => join('/sys/fs/cgroup', e.name));
    return existsSync('/sys/fs/cgroup/cgroup.procs') ? ['/sys/fs/cgroup'] : roots;
  } catch {
    return [];
  }
}

/** Every cgroup directory under the kubelet's kubepods tree, deepest first. */
function kubepodsCgroups(): string[] {
  const dirs: string[] = [];
  const walk = (dir: string) => {
    dirs.push(dir);
    try {
      for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) walk(join(dir, e.name));
    } catch {
      // removed meanwhile
    }
  };
  for (const root of cgroupRoots()) if (existsSync(join(root, 'kubepods'))) walk(join(root, 'kubepods'));
  return dirs.sort((a, b) => b.length - a.length);
}

/**
 * Removes whatever a real node left on this machine (the caller holds the
 * machine's lock), whether its owner tore it down or died: processes started from the node binaries (kubelet,
 * kube-proxy, containerd, shims) and every process in the kubelet's pod
 * cgroups, mounts and network namespaces under the node's directories, the
 * bridge and its interfaces, KUBE-* iptables chains, the kubepods cgroups, the
 * sysctls it set, its directories. Safe to run twice and when nothing is left.
 */
export async function cleanupRealNode(
  options: { log?: (line: string) => void; binaries?: Pick<NodeBinaries, 'node'>; reason?: string } = {},
): Promise<void> {
  const log = options.log ?? (() => {});
  const owner = readOwner();
  const leftovers = [REAL_NODE.runDir, REAL_NODE.varDir, `/sys/class/net/${REAL_NODE.bridge}`].some((p) =>
    existsSync(p),
  );
  if (!leftovers && !options.binaries) return;
  if (options.reason && leftovers)
    log(`cleaning up ${options.reason}${owner ? ` (cluster "${owner.cluster}", pid ${owner.pid})` : ''}`);

  // 1. Processes: ours by executable path, then whatever still runs in pod cgroups.
  const binDirs = [join(cacheRoot(), 'realnode', 'bin'), ...(owner ? [owner.binDir] : [])];
  for (let round = 0; round < 2; round++) {
    const pids = processesRunningFrom(binDirs);
    const inPods = kubepodsCgroups().flatMap((dir) => {
      try {
        return readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
      } catch {
        return [];
      }
    });
    const all = [...new Set([...pids, ...inPods])].filter((pid) => pid !== process.pid);
    if (all.length === 0) break;
    if (round === 0) log(`killing ${all.length} leftover real-node processes`);
    for (const pid of all) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await waitFor('leftover real-node processes to exit', () => all.every((pid) => !processAlive(pid)), {
      timeoutMs: 10_000,
      intervalMs: 100,
    }).catch(() => undefined);
  }

  // 2. kube-proxy's own cleanup of its rules, then any KUBE-* chain left (the kubelet's canaries too).
  const nodeBinary = options.binaries?.node ?? (owner ? join(owner.binDir, 'stateward-node') : undefined);
  if (nodeBinary && existsSync(nodeBinary))
    await tryRun(nodeBinary, ['kube-proxy', '--cleanup', '--v=0'], { timeoutMs: 60_000 });
  await removeKubeChains('iptables', log);
  await removeKubeChains('ip6tables', log);

  // 3. Mounts (pod volumes, the kubelet's root, network namespaces, overlay snapshots), deepest first.
  for (const mountPoint of mountsUnder([REAL_NODE.varDir, REAL_NODE.runDir])) {
    const result = await tryRun('umount', ['-l', mountPoint]);
    if (!result.ok) log(`could not unmount ${mountPoint}: ${result.out}`);
  }

  // 4. Network: pod interfaces on the bridge, then the bridge.
  const ports = await tryRun('ip', ['-o', 'link', 'show', 'master', REAL_NODE.bridge]);
  if (ports.ok) {
    for (const line of ports.out.split('\n')) {
      const name = /^\d+: ([^@:]+)/.exec(line)?.[1];
      if (name) await tryRun('ip', ['link', 'del', name]);
    }
  }
  if ((await tryRun('ip', ['link', 'show', REAL_NODE.bridge])).ok)
    await tryRun('ip', ['link', 'del', REAL_NODE.bridge]);

  // 5. The kubelet's pod cgroups (empty now).
  for (const dir of kubepodsCgroups()) await rmdir(dir).catch(() => undefined);

  // 6. Sysctls back to what they were.
  const saved = join(REAL_NODE.runDir, 'sysctl.orig');
  if (existsSync(saved)) {
    for (const line of (await readFile(saved, 'utf8')).split('\n').filter(Boolean))
      await tryRun('sysctl', ['-qw', line]);
  }

  // 7. What the kubelet wrote at fixed paths: its device-plugin socket and
  // checkpoint, the /var/log/containers links into our pod logs; then the
  // directories it created (rmdir: only when empty).
  await rm('/var/lib/kubelet/device-plugins/kubelet.sock', { force: true });
  await rm('/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint', { force: true });
  try {
    for (const entry of readdirSync('/var/log/containers')) {
      const link = join('/var/log/containers', entry);
      if (readlinkOrEmpty(link).startsWith(`${REAL_NODE.varDir}/`)) await rm(link, { force: true });
    }
  } catch {
    // no directory
  }
  // Unknown (no owner file): leave the directories.
  const preexisting = owner?.preexisting ?? KUBELET_FIXED_DIRS;
  for (const dir of [...KUBELET_FIXED_DIRS].reverse())
    if (!preexisting.includes(dir)) await rmdir(dir).catch(() => undefined);

  // 8. Our directories; libcni's result cache for our pods (outside them).
  await rm(REAL_NODE.varDir, { recursive: true, force: true });
  await rm(REAL_NODE.runDir, { recursive: true, force: true });
  try {
    for (const entry of readdirSync('/var/lib/cni/results')) {
      const sandbox = new RegExp(`^${REAL_NODE.cniNetwork}-([0-9a-f]{64})-eth0$`).exec(entry)?.[1];
      if (!sandbox) continue;
      await rm(join('/var/lib/cni/results', entry), { force: true });
      await rm(join('/var/lib/cni/results', `cni-loopback-${sandbox}-lo`), { force: true });
    }
  } catch {
    // no cache
  }
  for (const dir of ['/var/lib/cni/results', '/var/lib/cni']) await rmdir(dir).catch(() => undefined);
}

function readlinkOrEmpty(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

/** Live processes whose executable (argv[0]) lies in one of dirs: not a build that merely names them. */
function processesRunningFrom(dirs: string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
      if (dirs.some((dir) => argv0.startsWith(`${dir}/`)) && processAlive(pid)) pids.push(pid);
    } catch {
      // exited while we looked
    }
  }
  return pids;
}

/** Whether this machine has anything of a real node (running or left behind); false for non-root, who cannot clean it. */
export function realNodeLeftovers(): boolean {
  return (
    process.getuid?.() === 0 &&
    [REAL_NODE.lockDir, REAL_NODE.runDir, REAL_NODE.varDir, `/sys/class/net/${REAL_NODE.bridge}`].some((p) =>
      existsSync(p),
    )
  );
}

/**
 * Cleans up after a real node whose owner is gone: takes the machine's lock
 * first, so a real node another cluster has started since is left alone
 * (its own start cleaned up already). Returns whether it cleaned.
 */
export async function reclaimRealNode(log: (line: string) => void, reason: string): Promise<boolean> {
  try {
    await acquireMachineLock(0, log);
  } catch {
    return false;
  }
  try {
    await cleanupRealNode({ log, reason });
  } finally {
    await releaseMachineLock();
  }
  return true;
}

/**
 * For an owner exiting without teardown (its 'exit' handler can only send
 * signals): a detached process that waits for the owner to be gone, then
 * reclaims the real node. Its output goes to ~/.cache/stateward/realnode/reclaim.log.
 */
export function reclaimAfterExit(): void {
  const logPath = join(cacheRoot(), 'realnode', 'reclaim.log');
  let fd: number | 'ignore' = 'ignore';
  try {
    fd = openSync(logPath, 'a');
  } catch {
    // no log then
  }
  const script = fileURLToPath(new URL('./realnode-reclaim.ts', import.meta.url));
  spawn(process.execPath, [script, String(process.pid)], { detached: true, stdio: ['ignore', fd, fd] }).unref();
  if (typeof fd === 'number') closeSync(fd);
}
