// `stateward status`: lists what the report needs with the caller's own
// credentials (read-only: list, and only metadata of ConfigMaps and Secrets,
// so Secret values never leave the API server), builds the report and
// renders it, once or, with --watch, every --interval until interrupted.
// What the caller may not list is named on stderr and left out; the rest is
// still shown.
import { setTimeout as sleep } from 'node:timers/promises';
import { loadCliKubeConfig } from '../cli/clikubeconfig.ts';
import { listAll, requestFailure, type Listed } from '../cli/list.ts';
import { FlagSet, type FlagCodec } from '../runtime/flags/flagset.ts';
import { KubeClient } from '../runtime/kube/client.ts';
import { isForbidden, isNotFound } from '../runtime/kube/errors.ts';
import {
  resources,
  type KubeObject,
  type Lease,
  type Node,
  type Pod,
  type ResourceType,
  type StatefulSet,
} from '../runtime/kube/types.ts';
import { zpdbResource } from '../drain/zpdb/zpdbresource.ts';
import { STATUS_CONFIGMAP } from '../rollout/status.ts';
import { buildStatus, RESOURCE } from './build.ts';
import type { StatusInput, StatusReport } from './model.ts';
import { renderJson, renderProgress, renderTable } from './render.ts';
import { LEDGER_LABEL } from '../vocabulary/keys.ts';

export interface StatusIo {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
  /** Whether `out` is a terminal (--watch then redraws in place); default: process.stdout.isTTY. */
  isTTY?: boolean;
  /** Terminal width for the --watch bars; default: process.stdout.columns, else 80. */
  columns?: number;
  /** Ends --watch; default: the process's SIGINT. */
  signal?: AbortSignal;
}

type Output = 'table' | 'json';

const REQUEST_TIMEOUT_MS = 30_000;

interface Options {
  namespace: string | undefined;
  allNamespaces: boolean;
  output: Output;
  watch: boolean;
  intervalMs: number;
  kubeconfig: string;
  context: string;
}

/** Two spellings of one flag (-n/--namespace): the last occurrence wins, whichever it is. */
function shared<T>(typeName: string, parse: (text: string) => T, set: (value: T) => void): FlagCodec<T | undefined> {
  return {
    parse: (text) => {
      const v = parse(text);
      set(v);
      return v;
    },
    format: (v) => (v === undefined ? '' : String(v)),
    zeroText: '',
    typeName,
  };
}

function parseFlags(argv: readonly string[], io: StatusIo): Options | { exit: number } {
  const fs = new FlagSet('stateward status');
  let namespace: string | undefined;
  let output: Output = 'table';
  const ns = shared(
    'namespace',
    (t) => t,
    (v) => (namespace = v),
  );
  fs.value(
    'n',
    undefined,
    'Namespace to report (default: the kubeconfig context\'s namespace, else "default"). Same as -namespace.',
    ns,
  );
  fs.value('namespace', undefined, 'Namespace to report. Same as -n.', ns);
  const all = fs.bool('A', false, 'Report every namespace. Same as -all-namespaces.');
  const allLong = fs.bool('all-namespaces', false, 'Report every namespace. Same as -A.');
  const out = shared<Output>(
    'format',
    (t) => {
      if (t !== 'table' && t !== 'json') throw new Error('must be table or json');
      return t;
    },
    (v) => (output = v),
  );
  fs.value('o', undefined, 'Output `format`: table or json (default table). Same as -output.', out);
  fs.value('output', undefined, 'Output `format`: table or json (default table). Same as -o.', out);
  const watch = fs.bool('watch', false, 'Redraw every -interval until interrupted (Ctrl-C).');
  const interval = fs.duration('interval', 2_000, 'How often -watch redraws.');
  const kubeconfig = fs.string(
    'kubeconfig',
    '',
    'Path to the kubeconfig (default: $KUBECONFIG, else ~/.kube/config; in a pod, the in-cluster configuration).',
  );
  const context = fs.string('context', '', 'The kubeconfig context to use (default: its current context).');
  const parsed = fs.parse(argv, {});
  if (parsed.kind === 'help') {
    io.err(parsed.usage);
    return { exit: 0 };
  }
  if (parsed.kind === 'error') {
    io.err(`${parsed.message}\n${parsed.usage}`);
    return { exit: 2 };
  }
  if (parsed.args.length > 0) {
    io.err(`unexpected argument: ${parsed.args[0]}\n${fs.usage()}`);
    return { exit: 2 };
  }
  if (interval.value <= 0) {
    io.err(`invalid value for flag -interval: must be greater than 0\n`);
    return { exit: 2 };
  }
  if ((all.value || allLong.value) && namespace !== undefined) {
    io.err('-n/-namespace and -A/-all-namespaces cannot be used together\n');
    return { exit: 2 };
  }
  return {
    namespace,
    allNamespaces: all.value || allLong.value,
    output,
    watch: watch.value,
    intervalMs: interval.value,
    kubeconfig: kubeconfig.value,
    context: context.value,
  };
}

// ---------------------------------------------------------------- listing

interface ListSpec {
  key: keyof typeof RESOURCE;
  type: ResourceType;
  labelSelector?: string;
  metadataOnly?: boolean;
  /** What is left out when the list is forbidden. */
  without: string;
  /** A 404 means none (an absent CRD). */
  optional?: boolean;
}

const LISTS: ListSpec[] = [
  { key: 'statefulSets', type: resources.statefulSets, without: 'rollout groups and StatefulSets are not shown' },
  { key: 'pods', type: resources.pods, without: 'pod counts, readiness and rollout plans are unknown' },
  {
    key: 'zpdbs',
    type: zpdbResource,
    without: 'zone-aware disruption budgets are not shown nor checked',
    optional: true,
  },
  {
    key: 'leases',
    type: resources.leases,
    labelSelector: `${LEDGER_LABEL}=true`,
    without: 'pending evictions of disruption budgets are unknown',
  },
  { key: 'deployments', type: resources.deployments, without: 'Deployments restarted on config changes are not shown' },
  { key: 'daemonSets', type: resources.daemonSets, without: 'DaemonSets restarted on config changes are not shown' },
  { key: 'configMaps', type: resources.configMaps, metadataOnly: true, without: 'missing ConfigMaps are not detected' },
  { key: 'secrets', type: resources.secrets, metadataOnly: true, without: 'missing Secrets are not detected' },
];

interface Fetched {
  objects: Omit<StatusInput, 'now' | 'namespaces'>;
  warnings: string[];
}

async function fetchObjects(client: KubeClient, namespace: string | undefined, signal: AbortSignal): Promise<Fetched> {
  const warnings: string[] = [];
  const unreadable: string[] = [];
  const take = async <T extends KubeObject>(key: keyof typeof RESOURCE, listed: Promise<Listed<T>>): Promise<T[]> => {
    const result = await listed;
    if ('items' in result) return result.items;
    warnings.push(`warning: ${result.message}`);
    unreadable.push(RESOURCE[key]);
    return [];
  };
  const lists = await Promise.all(
    LISTS.map((spec) =>
      take(
        spec.key,
        listAll(client, spec.type, {
          namespace,
          labelSelector: spec.labelSelector,
          metadataOnly: spec.metadataOnly,
          optional: spec.optional,
          without: spec.without,
          signal,
        }),
      ),
    ),
  );
  const nodes = await take(
    'nodes',
    listAll<Node>(client, resources.nodes, { without: 'zones are taken from labels only', signal }),
  );
  // The operator's own view, when readable; its absence or a denial says nothing new (ConfigMaps are warned about above).
  const operatorStatus = unreadable.includes(RESOURCE.configMaps)
    ? []
    : await listAll(client, resources.configMaps, {
        namespace,
        fieldSelector: `metadata.name=${STATUS_CONFIGMAP}`,
        signal,
      }).then(
        (l) => ('items' in l ? l.items : []),
        () => [],
      );
  const [statefulSets, pods, zpdbs, leases, deployments, daemonSets, configMaps, secrets] = lists;
  return {
    objects: {
      statefulSets: statefulSets as StatefulSet[],
      pods: pods as Pod[],
      zpdbs: zpdbs!,
      leases: leases as Lease[],
      deployments: deployments!,
      daemonSets: daemonSets!,
      configMaps: configMaps!,
      secrets: secrets!,
      operatorStatus,
      nodes,
      unreadable,
    },
    warnings,
  };
}

/** The namespaces to report with -A: those holding anything the report is about, sorted. */
function namespacesOf(objects: Fetched['objects']): string[] {
  const names = new Set<string>();
  for (const list of [objects.statefulSets, objects.zpdbs, objects.deployments, objects.daemonSets]) {
    for (const o of list) if (o.metadata?.namespace) names.add(o.metadata.namespace);
  }
  return [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

async function snapshot(
  client: KubeClient,
  options: Options,
  namespace: string,
  signal: AbortSignal,
): Promise<{ report: StatusReport; warnings: string[] }> {
  if (!options.allNamespaces) return namespaceStatus(client, namespace, signal);
  const fetched = await fetchObjects(client, undefined, signal);
  const report = buildStatus({ now: Date.now(), namespaces: namespacesOf(fetched.objects), ...fetched.objects });
  report.namespaces = report.namespaces.filter(
    (n) => n.groups.length > 0 || n.budgets.length > 0 || n.restarts.length > 0,
  );
  return { report, warnings: fetched.warnings };
}

/** True only when the API server says the namespace does not exist; a caller who may not read namespaces is not told. */
async function namespaceMissing(client: KubeClient, namespace: string, signal: AbortSignal): Promise<boolean> {
  try {
    await client.get(resources.namespaces, { name: namespace }, { signal });
    return false;
  } catch (error) {
    if (isNotFound(error)) return true;
    if (isForbidden(error)) return false;
    throw requestFailure(client, `get namespace ${namespace}`, error);
  }
}

/** One namespace's report, as `stateward status -n <namespace>` computes it (for the demo and other drivers). */
export async function namespaceStatus(
  client: KubeClient,
  namespace: string,
  signal: AbortSignal = new AbortController().signal,
): Promise<{ report: StatusReport; warnings: string[] }> {
  const fetched = await fetchObjects(client, namespace, signal);
  return {
    report: buildStatus({ now: Date.now(), namespaces: [namespace], ...fetched.objects }),
    warnings: fetched.warnings,
  };
}

function render(report: StatusReport, options: Options, columns: number): string {
  if (options.output === 'json') return renderJson(report);
  return options.watch ? renderProgress(report, columns) : renderTable(report);
}

const CLEAR = '\x1b[H\x1b[2J';

export async function runStatus(argv: readonly string[], io: StatusIo): Promise<number> {
  const options = parseFlags(argv, io);
  if ('exit' in options) return options.exit;
  let client: KubeClient;
  let namespace: string;
  try {
    const loaded = loadCliKubeConfig({ kubeconfig: options.kubeconfig, context: options.context, env: io.env });
    namespace = options.namespace ?? loaded.namespace;
    client = new KubeClient({
      kubeConfig: loaded.kubeConfig,
      timeoutMs: REQUEST_TIMEOUT_MS,
      userAgent: 'stateward-status',
      env: io.env,
    });
  } catch (error) {
    io.err(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  const columns = io.columns ?? process.stdout.columns ?? 80;
  const isTTY = io.isTTY ?? process.stdout.isTTY === true;
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  const external = io.signal;
  if (external) external.addEventListener('abort', onSigint, { once: true });
  else if (options.watch) process.once('SIGINT', onSigint);
  try {
    // An empty report of a namespace that is not there would read as "nothing to worry about".
    if (!options.allNamespaces && (await namespaceMissing(client, namespace, stop.signal))) {
      io.err(`error: namespace "${namespace}" not found\n`);
      return 1;
    }
    if (!options.watch) {
      const { report, warnings } = await snapshot(client, options, namespace, stop.signal);
      for (const w of warnings) io.err(`${w}\n`);
      io.out(render(report, options, columns));
      return 0;
    }
    const warned = new Set<string>();
    let frames = 0;
    let failed = false;
    while (!stop.signal.aborted) {
      let frame: string;
      try {
        const { report, warnings } = await snapshot(client, options, namespace, stop.signal);
        for (const w of warnings) {
          if (!warned.has(w)) io.err(`${w}\n`);
          warned.add(w);
        }
        frame = render(report, options, columns);
        failed = false;
      } catch (error) {
        if (stop.signal.aborted) break;
        // A transient failure shows in the frame; the next one may succeed.
        frame = `error: ${error instanceof Error ? error.message : String(error)}\n`;
        failed = true;
      }
      io.out(isTTY ? CLEAR + frame : frames === 0 ? frame : `\n${frame}`);
      frames++;
      try {
        await sleep(options.intervalMs, undefined, { signal: stop.signal });
      } catch {
        break;
      }
    }
    return failed ? 1 : 0;
  } catch (error) {
    io.err(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  } finally {
    if (external) external.removeEventListener('abort', onSigint);
    else process.removeListener('SIGINT', onSigint);
    await client.close().catch(() => undefined);
  }
}
