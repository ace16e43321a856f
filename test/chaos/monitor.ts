// The chaos monitor: an independent process that watches the soak's
// namespaces with @kubernetes/client-node's ListWatch (never Stateward's own
// informers or planners) and records every breach of Stateward's promises
// that it sees. The rules are in invariants.ts.
//
//   node test/chaos/monitor.ts --kubeconfig K --namespaces a,b --out report.json
//        [--events-namespaces op] [--secrets values.txt] [--logs-dir dir]
//        [--gate-timeline timeline.jsonl --gated-namespaces a,b]
//        [--profile-namespaces couchbase=x,kafka=y] [--csi]
//
// It rewrites --out every 2 s while it runs ({final: false, synced, pending,
// violations, counters}); on SIGTERM it runs the final checks (changes still
// not applied, secret values in Events and in every *.log under --logs-dir,
// as they are or base64-encoded), writes {final: true, ...} and exits 0.
// With --gate-timeline it also judges the health gate (healthgate.ts): the
// soak appends what it did to the exporter and to Prometheus to that file,
// and no gated StatefulSet may start rolling while the policy says pause.
// With --profile-namespaces it watches the pods of the reschedule profiles'
// namespaces too and judges the drains there (profileinvariants.ts). With
// --csi it watches the namespaces' SecretProviderClassPodStatuses too (the
// Secrets Store CSI driver's CRDs installed) and judges the restarts on
// their rotations (csiinvariants.ts).
import { closeSync, openSync, readSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  HttpMethod,
  KubeConfig,
  ListWatch,
  RequestContext,
  Watch,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { fetch } from 'undici';
import { gateViolations, GateStartTracker, pauseIntervals, type TimelineEntry } from './healthgate.ts';
import { InvariantChecker, type Violation, type Watched, type WatchType } from './invariants.ts';
import { soakProfileRules } from './profileinvariants.ts';

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    namespaces: { type: 'string' },
    'events-namespaces': { type: 'string', default: '' },
    out: { type: 'string' },
    secrets: { type: 'string' },
    'logs-dir': { type: 'string' },
    'gate-timeline': { type: 'string' },
    'gated-namespaces': { type: 'string', default: '' },
    'profile-namespaces': { type: 'string', default: '' },
    csi: { type: 'boolean', default: false },
  },
});
if (!values.kubeconfig || !values.namespaces || !values.out) {
  console.error(
    'usage: node test/chaos/monitor.ts --kubeconfig K --namespaces a,b --out report.json [--events-namespaces x] [--secrets file] [--logs-dir dir]',
  );
  process.exit(2);
}
const out = values.out;
const namespaces = values.namespaces.split(',').filter(Boolean);
const eventNamespaces = [...new Set([...namespaces, ...values['events-namespaces'].split(',').filter(Boolean)])];

const kc = new KubeConfig();
kc.loadFromFile(values.kubeconfig);
/** couchbase=<namespace>,kafka=<namespace>: where the soak's Couchbase and Strimzi profiles apply. */
const profileNamespaces = Object.fromEntries(
  values['profile-namespaces']
    .split(',')
    .filter(Boolean)
    .map((pair) => pair.split('=') as [string, string]),
);
const profiles =
  profileNamespaces['couchbase'] && profileNamespaces['kafka']
    ? soakProfileRules({ couchbase: profileNamespaces['couchbase'], kafka: profileNamespaces['kafka'] })
    : [];
const checker = new InvariantChecker({ profiles });
const gates = new GateStartTracker();
const gatedNamespaces = values['gated-namespaces'].split(',').filter(Boolean);
const startedAt = new Date().toISOString();
/** Every version of every Event seen, for the secret scan at the end. */
const eventTexts = new Map<string, string>();

async function getJson<T>(path: string): Promise<T> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('no current cluster in the kubeconfig');
  const ctx = new RequestContext(server + path, HttpMethod.GET);
  await kc.applySecurityAuthentication(ctx);
  const response = await fetch(server + path, {
    headers: ctx.getHeaders(),
    dispatcher: ctx.getDispatcher(),
    signal: AbortSignal.timeout(30_000),
  });
  if (!response.ok) {
    const error = new Error(`GET ${path}: ${response.status}`) as Error & { statusCode: number };
    error.statusCode = response.status;
    throw error;
  }
  return (await response.json()) as T;
}

/** One resource in one namespace: a ListWatch restarted after every error, with relists marked. */
class Stream {
  readonly name: string;
  listed = false;
  relists = 0;
  errors = 0;
  private relisting = false;
  private stopped = false;
  private readonly informer: ListWatch<KubernetesObject>;

  constructor(kind: Watched['kind'], path: string) {
    this.name = `${kind} ${path}`;
    const list = async () => {
      const result = await getJson<KubernetesListObject<KubernetesObject>>(path);
      this.listed = true;
      this.relists++;
      // The ListWatch applies the list (DELETE for what vanished, ADD/UPDATE for the rest) synchronously once this resolves.
      this.relisting = true;
      setImmediate(() => (this.relisting = false));
      return result;
    };
    this.informer = new ListWatch(path, new Watch(kc), list, false);
    const deliver = (type: WatchType) => (object: KubernetesObject) => {
      const now = Date.now();
      if (kind === 'Event')
        eventTexts.set(`${object.metadata?.uid}/${object.metadata?.resourceVersion}`, JSON.stringify(object));
      try {
        checker.apply({ kind, object } as Watched, type, now, this.relisting);
        if (kind === 'Pod') gates.applyPod(object, type, now, this.relisting);
        if (kind === 'StatefulSet') gates.applyStatefulSet(object, type, now);
      } catch (error) {
        checker.count('monitorErrors');
        console.error(`monitor: ${this.name}: ${error instanceof Error ? error.stack : String(error)}`);
      }
    };
    this.informer.on('add', deliver('ADDED'));
    this.informer.on('update', deliver('MODIFIED'));
    this.informer.on('delete', deliver('DELETED'));
    this.informer.on('error', () => {
      if (this.stopped) return;
      this.errors++;
      setTimeout(() => {
        if (!this.stopped) void this.informer.start().catch(() => undefined);
      }, 1000).unref();
    });
  }

  async start(): Promise<void> {
    await this.informer.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.informer.stop();
  }
}

const streams: Stream[] = [];
for (const ns of namespaces) {
  streams.push(
    new Stream('Pod', `/api/v1/namespaces/${ns}/pods`),
    new Stream('StatefulSet', `/apis/apps/v1/namespaces/${ns}/statefulsets`),
    new Stream('Deployment', `/apis/apps/v1/namespaces/${ns}/deployments`),
    new Stream('CronJob', `/apis/batch/v1/namespaces/${ns}/cronjobs`),
    new Stream('Job', `/apis/batch/v1/namespaces/${ns}/jobs`),
    new Stream('ConfigMap', `/api/v1/namespaces/${ns}/configmaps`),
    new Stream('Secret', `/api/v1/namespaces/${ns}/secrets`),
    new Stream(
      'ZoneAwarePodDisruptionBudget',
      `/apis/rollout-operator.grafana.com/v1/namespaces/${ns}/zoneawarepoddisruptionbudgets`,
    ),
  );
  if (values.csi)
    streams.push(
      new Stream(
        'SecretProviderClassPodStatus',
        `/apis/secrets-store.csi.x-k8s.io/v1/namespaces/${ns}/secretproviderclasspodstatuses`,
      ),
    );
}
for (const ns of new Set(profiles.map((p) => p.namespace)))
  streams.push(new Stream('Pod', `/api/v1/namespaces/${ns}/pods`));
for (const ns of eventNamespaces) streams.push(new Stream('Event', `/apis/events.k8s.io/v1/namespaces/${ns}/events`));

// ------------------------------------------------------------- secret scan

function secretNeedles(): { label: string; needle: string }[] {
  if (!values.secrets) return [];
  let text = '';
  try {
    text = readFileSync(values.secrets, 'utf8');
  } catch {
    return [];
  }
  const needles: { label: string; needle: string }[] = [];
  for (const [i, value] of text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .entries()) {
    // Never write the value itself into the report: its index and first characters identify it.
    const label = `secret value #${i + 1} (${value.slice(0, 4)}…)`;
    needles.push(
      { label, needle: value },
      { label: `${label} base64-encoded`, needle: Buffer.from(value).toString('base64').replace(/=+$/, '') },
    );
  }
  checker.counters['secretValuesWatched'] = needles.length / 2;
  return needles;
}

function scanSecrets(now: number): Violation[] {
  const found: Violation[] = [];
  const needles = secretNeedles();
  if (needles.length === 0) return found;
  for (const [key, text] of eventTexts) {
    for (const { label, needle } of needles) {
      if (text.includes(needle))
        found.push({
          at: new Date(now).toISOString(),
          kind: 'secret-in-event',
          message: `${label} appears in Event ${key}`,
        });
    }
  }
  checker.counters['eventVersionsScanned'] = eventTexts.size;
  if (!values['logs-dir']) return found;
  const overlap = Math.max(...needles.map((n) => n.needle.length));
  let bytes = 0;
  for (const file of readdirSync(values['logs-dir'])
    .filter((f) => f.endsWith('.log'))
    .sort()) {
    const path = join(values['logs-dir'], file);
    const size = statSync(path).size;
    const fd = openSync(path, 'r');
    try {
      const chunk = Buffer.alloc(8 << 20);
      let carry = '';
      for (let offset = 0; offset < size;) {
        const n = readSync(fd, chunk, 0, chunk.length, offset);
        if (n <= 0) break;
        const text = carry + chunk.subarray(0, n).toString('utf8');
        for (const { label, needle } of needles) {
          const at = text.indexOf(needle);
          if (at >= 0)
            found.push({
              at: new Date(now).toISOString(),
              kind: 'secret-in-log',
              message: `${label} appears in ${file} near byte ${offset - carry.length + at}`,
            });
        }
        carry = text.slice(-overlap);
        offset += n;
        bytes += n;
      }
    } finally {
      closeSync(fd);
    }
  }
  checker.counters['logBytesScanned'] = bytes;
  return found;
}

// ------------------------------------------------------------ health gate

/** The soak's timeline so far (a line being written is skipped until the next read). */
function readTimeline(): TimelineEntry[] {
  if (!values['gate-timeline']) return [];
  let text = '';
  try {
    text = readFileSync(values['gate-timeline'], 'utf8');
  } catch {
    return [];
  }
  const entries: TimelineEntry[] = [];
  for (const line of text.split('\n')) {
    try {
      if (line.trim()) entries.push(JSON.parse(line) as TimelineEntry);
    } catch {
      // a partial last line
    }
  }
  return entries;
}

function judgeGates(now: number): Violation[] {
  gates.tick(now);
  if (!values['gate-timeline']) return [];
  const timeline = readTimeline();
  const pauses = pauseIntervals(timeline, gatedNamespaces);
  checker.counters['gatePauseIntervals'] = [...pauses.values()].reduce((n, l) => n + l.length, 0);
  checker.counters['gatedStarts'] = gates.starts.length;
  checker.counters['rolloutStartsSeen'] = gates.startsSeen;
  return gateViolations(pauses, gates.starts);
}

// ------------------------------------------------------------------ report

let synced = false;

function write(final: boolean, extra: Violation[] = []): void {
  synced ||= streams.every((s) => s.listed);
  const report = {
    final,
    synced,
    startedAt,
    writtenAt: new Date().toISOString(),
    namespaces,
    violations: [...checker.violations, ...extra],
    pending: checker.pending(),
    unconfirmedOperatorDeletes: checker.unconfirmedDeletes().slice(0, 50),
    counters: {
      ...checker.counters,
      relists: streams.reduce((n, s) => n + Math.max(0, s.relists - 1), 0),
      watchErrors: streams.reduce((n, s) => n + s.errors, 0),
    },
  };
  // Dedupe identical secret findings (one value found in many Event versions).
  const seen = new Set<string>();
  report.violations = report.violations.filter((v) => {
    const key = `${v.kind}|${v.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  writeFileSync(`${out}.tmp`, JSON.stringify(report, null, 2));
  renameSync(`${out}.tmp`, out);
}

const timer = setInterval(() => {
  checker.tick(Date.now());
  write(false, judgeGates(Date.now()));
}, 2000);

let stopping = false;
async function shutdown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  clearInterval(timer);
  await Promise.all(streams.map((s) => s.stop()));
  const now = Date.now();
  checker.finish(now);
  const secrets = scanSecrets(now);
  write(true, [...judgeGates(now + 60_000), ...secrets]);
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());

await Promise.all(streams.map((s) => s.start().catch(() => undefined)));
write(false);
