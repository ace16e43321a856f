// `stateward doctor`: lists what the checks need (Secrets and ConfigMaps as
// metadata only: their values are never fetched), runs diagnose() and
// prints each finding with its fix. Exit 1 when something is wrong (any
// error), 0 when only warnings or nothing, 2 for a bad command line.
import { CliError, loadCliKubeConfig } from '../cli/clikubeconfig.ts';
import { listAll, requestFailure, type Listed } from '../cli/list.ts';
import { FlagSet } from '../runtime/flags/flagset.ts';
import { KubeClient } from '../runtime/kube/client.ts';
import { isForbidden, isNotFound } from '../runtime/kube/errors.ts';
import {
  resources,
  type KubeObject,
  type Lease,
  type Namespace,
  type Pod,
  type ResourceType,
  type StatefulSet,
} from '../runtime/kube/types.ts';
import { zpdbResource } from '../drain/zpdb/zpdbresource.ts';
import { healthCheckResource, type RolloutHealthCheck } from '../rollout/healthcheck/resource.ts';
import { operatorPermissions } from './access.ts';
import { leaderLeaseOf, serviceKey, webhookServices } from './checks/operatorrunning.ts';
import { probeQueryEndpoint, type EndpointProber } from './endpoints.ts';
import { gatherRefusals } from './operatormetrics.ts';
import { endpointsToProbe } from './checks/healthchecks.ts';
import { diagnose } from './checks.ts';
import { Scope } from './checks/scope.ts';
import type {
  DaemonSet,
  Deployment,
  DoctorInput,
  Finding,
  OperatorLease,
  WebhookConfigurationObject,
} from './checks/scope.ts';

export interface DoctorIo {
  out(s: string): void;
  err(s: string): void;
  env: NodeJS.ProcessEnv;
  /** How RolloutHealthCheck endpoints are probed (tests put their own; default: doctor/endpoints.ts). */
  probeEndpoint?: EndpointProber;
}

export interface GatherOptions {
  /** Probes each valid RolloutHealthCheck's prometheusURL; none: no probe, no finding. */
  probeEndpoint?: EndpointProber | undefined;
  /** The operator's /metrics, as -operator-metrics-url gives it; none: each operator pod's, through the API server's proxy. */
  operatorMetricsUrl?: string | undefined;
}

const USER_AGENT = 'stateward-doctor';

/** The doctor's flags (kubectl's names and short forms), declared apart so runDoctor reads as parse, check, diagnose, print. */
function doctorFlags() {
  const fs = new FlagSet('stateward doctor');
  return {
    fs,
    namespaceLong: fs.string(
      'namespace',
      '',
      'Namespace to diagnose (default: the kubeconfig context\'s namespace, else "default").',
    ),
    namespaceShort: fs.string('n', '', 'Short for -namespace.'),
    allLong: fs.bool('all-namespaces', false, 'Diagnose every namespace.'),
    allShort: fs.bool('A', false, 'Short for -all-namespaces.'),
    outputShort: fs.enumString('o', 'text', ['text', 'json'], 'Output format: text or json.'),
    outputLong: fs.enumString('output', 'text', ['text', 'json'], 'Same as -o.'),
    kubeconfigPath: fs.string(
      'kubeconfig',
      '',
      'Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster configuration).',
    ),
    contextName: fs.string('context', '', 'The kubeconfig context to use (default: its current-context).'),
    operatorNamespace: fs.string(
      'operator-namespace',
      '',
      'Namespace the operator runs in, when its Deployment is not visible to the doctor (to check the webhook configurations against it).',
    ),
    timeout: fs.duration('request-timeout', 30_000, 'Timeout of each API request.'),
    probeEndpoints: fs.bool(
      'probe-endpoints',
      true,
      "Probe each RolloutHealthCheck's prometheusURL from here (GET /api/v1/status/buildinfo, 2s, no credentials); -probe-endpoints=false skips it.",
    ),
    operatorMetricsUrl: fs.string(
      'operator-metrics-url',
      '',
      "The operator's /metrics (e.g. http://127.0.0.1:8001/metrics after kubectl port-forward), to read the API requests refused to it; default: each operator pod's, through the API server's proxy (needs get pods/proxy).",
    ),
  };
}

/** Runs `stateward doctor <argv>`; resolves to the exit code. */
export async function runDoctor(argv: readonly string[], io: DoctorIo): Promise<number> {
  const {
    fs,
    namespaceLong,
    namespaceShort,
    allLong,
    allShort,
    outputShort,
    outputLong,
    kubeconfigPath,
    contextName,
    operatorNamespace,
    timeout,
    probeEndpoints,
    operatorMetricsUrl,
  } = doctorFlags();

  const parsed = fs.parse(argv, {});
  if (parsed.kind === 'help') {
    io.err(
      `stateward doctor [flags]: reads the cluster and reports Stateward misconfigurations, each with its fix.\nExit code: 0 nothing wrong (warnings allowed), 1 something is wrong, 2 bad flags.\n\n${parsed.usage}`,
    );
    return 0;
  }
  const usageError = (message: string): number => {
    io.err(`${message}\n${fs.usage()}`);
    return 2;
  };
  if (parsed.kind === 'error') return usageError(parsed.message);
  if (parsed.args.length > 0) return usageError(`unexpected argument: ${parsed.args[0]!}`);
  if (namespaceLong.value && namespaceShort.value && namespaceLong.value !== namespaceShort.value)
    return usageError('-n and -namespace name different namespaces');
  const all = allLong.value || allShort.value;
  const namespaceFlag = namespaceLong.value || namespaceShort.value;
  if (all && namespaceFlag) return usageError('-n/-namespace and -A/-all-namespaces cannot be used together');
  if (fs.isSet('o') && fs.isSet('output') && outputShort.value !== outputLong.value)
    return usageError('-o and -output differ');
  const output = fs.isSet('output') ? outputLong.value : outputShort.value;
  if (timeout.value <= 0) return usageError('-request-timeout must be positive');

  let client: KubeClient | undefined;
  try {
    const { kubeConfig, namespace: contextNamespace } = loadCliKubeConfig({
      kubeconfig: kubeconfigPath.value,
      context: contextName.value,
      env: io.env,
    });
    const namespace = all ? undefined : namespaceFlag || contextNamespace;
    try {
      client = new KubeClient({ kubeConfig, timeoutMs: timeout.value, userAgent: USER_AGENT, env: io.env });
    } catch (error) {
      throw new CliError(`kubeconfig: ${messageOf(error)}`);
    }
    const input = await gather(client, namespace, operatorNamespace.value || undefined, {
      probeEndpoint: probeEndpoints.value ? (io.probeEndpoint ?? ((url) => probeQueryEndpoint(url))) : undefined,
      operatorMetricsUrl: operatorMetricsUrl.value || undefined,
    });
    const findings = diagnose(input);
    const where = namespace === undefined ? 'all namespaces' : `namespace ${namespace}`;
    if (output === 'json') {
      io.out(
        `${JSON.stringify({ namespaces: namespace === undefined ? 'all' : [namespace], errors: count(findings, 'error'), warnings: count(findings, 'warning'), findings }, null, 2)}\n`,
      );
    } else {
      io.out(renderText(findings, where, input));
    }
    return findings.some((f) => f.severity === 'error') ? 1 : 0;
  } catch (error) {
    io.err(`stateward doctor: ${messageOf(error)}\n`);
    return 1;
  } finally {
    await client?.close().catch(() => undefined);
  }
}

function count(findings: readonly Finding[], severity: Finding['severity']): number {
  return findings.filter((f) => f.severity === severity).length;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** One block per finding, then a summary line. */
export function renderText(
  findings: readonly Finding[],
  where: string,
  input?: Pick<
    DoctorInput,
    'statefulSets' | 'zpdbs' | 'validatingWebhookConfigurations' | 'mutatingWebhookConfigurations'
  >,
): string {
  const blocks = findings.map(
    (f) => `${f.severity === 'error' ? 'ERROR' : 'WARNING'}  ${f.object}: ${f.problem}\n  fix: ${f.fix}\n`,
  );
  const checked = input
    ? ` (checked ${plural(input.statefulSets.length, 'StatefulSet')}, ${plural(input.zpdbs.length, 'ZoneAwarePodDisruptionBudget')}, ${plural(input.validatingWebhookConfigurations.length + input.mutatingWebhookConfigurations.length, 'webhook configuration')})`
    : '';
  const errors = count(findings, 'error');
  const warnings = count(findings, 'warning');
  const summary =
    findings.length === 0
      ? `No problems found in ${where}${checked}.\n`
      : `${plural(errors, 'error')}, ${plural(warnings, 'warning')} in ${where}${checked}.\n`;
  return [...blocks, summary].join('\n');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Lists everything diagnose() needs; forbidden lists become `unreadable`. */
export async function gather(
  client: KubeClient,
  namespace: string | undefined,
  operatorNamespace?: string,
  options: GatherOptions = {},
): Promise<DoctorInput> {
  const unreadable: string[] = [];
  const take = <T>(resource: string, listed: Listed<T>): T[] => {
    if ('items' in listed) return listed.items;
    unreadable.push(resource);
    return [];
  };
  // Connectivity and credentials first, so a wrong kubeconfig gives one clear message.
  const statefulSets = take('statefulsets', await listAll<StatefulSet>(client, resources.statefulSets, { namespace }));
  const namespaceLabels = namespace === undefined ? undefined : await labelsOfNamespace(client, namespace);
  const [
    pods,
    zpdbs,
    healthChecks,
    deployments,
    daemonSets,
    configMaps,
    secrets,
    validating,
    mutating,
    operatorsByName,
    operatorsByAppName,
  ] = await Promise.all([
    listAll<Pod>(client, resources.pods, { namespace, metadataOnly: true }),
    listAll<KubeObject>(client, zpdbResource, { namespace, optional: true }),
    listAll<RolloutHealthCheck>(client, healthCheckResource, { namespace, optional: true }),
    listAll<Deployment>(client, resources.deployments, { namespace }),
    listAll<DaemonSet>(client, resources.daemonSets, { namespace }),
    listAll<KubeObject>(client, resources.configMaps, { namespace, metadataOnly: true }),
    // Metadata only: Secret values never leave the API server.
    listAll<KubeObject>(client, resources.secrets, { namespace, metadataOnly: true }),
    listAll<WebhookConfigurationObject>(client, resources.validatingWebhookConfigurations, {}),
    listAll<WebhookConfigurationObject>(client, resources.mutatingWebhookConfigurations, {}),
    // The operator's own Deployment may live outside the diagnosed namespace.
    namespace === undefined
      ? Promise.resolve({ items: [] })
      : listAll<Deployment>(client, resources.deployments, { labelSelector: 'name in (stateward,rollout-operator)' }),
    namespace === undefined
      ? Promise.resolve({ items: [] })
      : listAll<Deployment>(client, resources.deployments, {
          labelSelector: 'app.kubernetes.io/name in (stateward,rollout-operator)',
        }),
  ]);
  const rolloutHealthChecks = take('rollouthealthchecks', healthChecks);
  const operators = [operatorsByName, operatorsByAppName].flatMap((l) => ('items' in l ? l.items : []));
  const input: DoctorInput = {
    now: Date.now(),
    ...(namespace !== undefined ? { namespaces: [namespace] } : {}),
    ...(namespaceLabels ? { namespaceLabels } : {}),
    ...(operatorNamespace ? { operatorNamespace } : {}),
    statefulSets,
    pods: take('pods', pods),
    zpdbs: take('zoneawarepoddisruptionbudgets', zpdbs),
    rolloutHealthChecks,
    deployments: take('deployments', deployments),
    daemonSets: take('daemonsets', daemonSets),
    configMaps: take('configmaps', configMaps),
    secrets: take('secrets', secrets),
    validatingWebhookConfigurations: take('validatingwebhookconfigurations', validating),
    mutatingWebhookConfigurations: take('mutatingwebhookconfigurations', mutating),
    ...(operators.length > 0 ? { operatorDeployments: operators } : {}),
    unreadable,
  };
  const probe = options.probeEndpoint;
  if (probe)
    input.healthCheckEndpoints = await Promise.all(endpointsToProbe(rolloutHealthChecks).map((url) => probe(url)));
  await gatherWebhookAndOperatorState(client, input, unreadable);
  // What the operator itself counts as refused: not judged where its metrics cannot be read.
  const running = new Scope(input).operatorDeployments();
  if (options.operatorMetricsUrl || running.length > 0)
    input.operatorRefusals = (
      await gatherRefusals(client, running, {
        ...(options.operatorMetricsUrl ? { url: options.operatorMetricsUrl } : {}),
      })
    ).refusals;
  return input;
}

/**
 * The diagnosed namespace's labels (webhooks' namespaceSelectors are
 * matched against them). A namespace that does not exist is the one clear
 * error; one the doctor may not read leaves them unknown.
 */
async function labelsOfNamespace(
  client: KubeClient,
  namespace: string,
): Promise<Record<string, Record<string, string>> | undefined> {
  try {
    const ns = await client.get<Namespace>(resources.namespaces, { name: namespace });
    return { [namespace]: ns.metadata?.labels ?? {} };
  } catch (error) {
    if (isNotFound(error)) throw new CliError(`namespace ${namespace} does not exist`);
    if (!isForbidden(error)) throw requestFailure(client, `get namespace ${namespace}`, error);
    return undefined;
  }
}

/**
 * What the listed objects point at, added to `input`: the webhooks'
 * Services and their ready endpoints, the operators' leader Leases and
 * permissions (subjectaccessreviews is unreadable when those cannot be asked).
 */
async function gatherWebhookAndOperatorState(
  client: KubeClient,
  input: DoctorInput,
  unreadable: string[],
): Promise<void> {
  input.webhookServices = await lookUpServices(client, webhookServices(new Scope(input)));
  input.webhookEndpoints = await readyEndpoints(
    client,
    Object.entries(input.webhookServices)
      .filter(([, exists]) => exists === true)
      .map(([key]) => key),
  );
  input.operatorLeases = await leaderLeases(client, new Scope(input).operatorDeployments());
  const permissions = await operatorPermissions(client, new Scope(input).operatorDeployments());
  if (permissions) input.operatorPermissions = permissions;
  else unreadable.push('subjectaccessreviews');
}

const SERVICES: ResourceType = { group: '', version: 'v1', resource: 'services', kind: 'Service', namespaced: true };

/** Whether each Service exists: false only on a 404; a Service the caller may not read is not judged. */
async function lookUpServices(client: KubeClient, keys: string[]): Promise<Record<string, boolean | undefined>> {
  const found: Record<string, boolean | undefined> = {};
  await Promise.all(
    keys.map(async (key) => {
      const [namespace, name] = key.split('/') as [string, string];
      try {
        await client.get(SERVICES, { namespace, name });
        found[key] = true;
      } catch (error) {
        if (isNotFound(error)) found[key] = false;
        else if (isForbidden(error)) found[key] = undefined;
        else throw requestFailure(client, `get service ${key}`, error);
      }
    }),
  );
  return found;
}

const ENDPOINT_SLICES: ResourceType = {
  group: 'discovery.k8s.io',
  version: 'v1',
  resource: 'endpointslices',
  kind: 'EndpointSlice',
  namespaced: true,
};

type EndpointSlice = KubeObject & { endpoints?: { conditions?: { ready?: boolean | null } }[] | null };

/** Ready endpoints behind each Service (its EndpointSlices); undefined where they may not be listed. */
async function readyEndpoints(client: KubeClient, keys: string[]): Promise<Record<string, number | undefined>> {
  const ready: Record<string, number | undefined> = {};
  await Promise.all(
    keys.map(async (key) => {
      const [namespace, name] = key.split('/') as [string, string];
      const listed = await listAll<EndpointSlice>(client, ENDPOINT_SLICES, {
        namespace,
        labelSelector: `kubernetes.io/service-name=${name}`,
      });
      // An endpoint whose ready condition is unknown counts as ready, as the API defines it.
      ready[key] =
        'items' in listed
          ? listed.items.flatMap((slice) => slice.endpoints ?? []).filter((e) => e.conditions?.ready !== false).length
          : undefined;
    }),
  );
  return ready;
}

/** The leader Lease of each operator Deployment with leader election: null when absent, undefined when unreadable. */
async function leaderLeases(
  client: KubeClient,
  operators: Deployment[],
): Promise<Record<string, OperatorLease | null | undefined>> {
  const leases: Record<string, OperatorLease | null | undefined> = {};
  await Promise.all(
    operators.map(async (d) => {
      const wanted = leaderLeaseOf(d);
      if (!wanted) return;
      const key = serviceKey(d.metadata?.namespace ?? '', d.metadata?.name ?? '');
      try {
        const lease = await client.get<Lease>(resources.leases, wanted);
        const renewed = lease.spec?.renewTime ? Date.parse(String(lease.spec.renewTime)) : Number.NaN;
        leases[key] = {
          ...wanted,
          holder: lease.spec?.holderIdentity ?? undefined,
          renewedAt: Number.isFinite(renewed) ? renewed : undefined,
          durationSeconds: lease.spec?.leaseDurationSeconds ?? undefined,
        };
      } catch (error) {
        if (isNotFound(error)) leases[key] = null;
        else if (isForbidden(error)) leases[key] = undefined;
        else throw requestFailure(client, `get lease ${wanted.namespace}/${wanted.name}`, error);
      }
    }),
  );
  return leases;
}
