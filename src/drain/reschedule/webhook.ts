// Reschedule-on-eviction, the imperative shell around decide.ts: reads the
// pod (informer cache, live GET when the cache does not have it), the
// tracking ConfigMap (live: the records must be current) and, only when a
// same-name replacement might be released, the pod's node; carries out the
// decision's effects in order and answers.
//
// Fail-closed for selected pods (every failure is a 429 the evictor
// retries, or a 500 for misconfiguration such as missing RBAC), fail-open
// for everything else (unselected pods and out-of-scope namespaces are
// allowed without an API call).
import { readFileSync } from 'node:fs';
import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../../runtime/clock.ts';
import type { FlagSet } from '../../runtime/flags/flagset.ts';
import { informerFor, type Informer } from '../../runtime/informer/informer.ts';
import type { KubeClient } from '../../runtime/kube/client.ts';
import { isAlreadyExists, isNotFound, KubeApiError } from '../../runtime/kube/errors.ts';
import { resources, type ConfigMap, type Node, type Pod } from '../../runtime/kube/types.ts';
import type { Logger } from '../../runtime/log/logger.ts';
import type { AdmissionHandler } from '../../runtime/admission/admission.ts';
import type { Runtime } from '../../runtime/operator.ts';
import { workloadCache } from '../../workloads/cache.ts';
import {
  DEFAULT_POD_SELECTOR,
  DEFAULT_RECORD_TTL_MS,
  DEFAULT_RESCHEDULE_ANNOTATION,
  DEFAULT_TRACKING_CONFIG_MAP,
  parseRescheduleConfig,
  type RescheduleConfig,
} from './rescheduleconfig.ts';
import {
  chooseProfile,
  parseProfilesFile,
  profileLabel,
  profilesInScope,
  profilesProblems,
  strimziProfileInput,
} from './profiles.ts';
import {
  apiErrorIsTransient,
  decideReschedule,
  effectFailed,
  newTrackingConfigMap,
  readEviction,
  type LookupFailure,
  type NodeLookup,
  type PodLookup,
  type RecordsLookup,
  type EvictionFacts,
  type RescheduleEffect,
} from './decide.ts';

export const RESCHEDULE_PATH = '/admission/reschedule-on-eviction';
/** Strimzi Drain Cleaner's path, serving the Strimzi profile only. */
export const DRAINER_PATH = '/drainer';

/** Every configured profile (served at RESCHEDULE_PATH), and the Strimzi one (served at DRAINER_PATH too). */
export interface RescheduleProfiles {
  profiles: RescheduleConfig[];
  strimzi?: RescheduleConfig;
}

/** -reschedule.* flags; read() fails with every problem at once. */
export function registerRescheduleFlags(fs: FlagSet): {
  enabled: () => boolean;
  read: () => RescheduleProfiles | { errors: string[] };
} {
  const enabled = fs.bool(
    'reschedule.enabled',
    false,
    `Serve ${RESCHEDULE_PATH}: refuse evictions of selected pods and annotate them so their operator moves them (Couchbase Eviction Reschedule Hook semantics).`,
  );
  const selector = fs.string(
    'reschedule.pod-selector',
    DEFAULT_POD_SELECTOR,
    'Label selector of the pods handled (key=value, or any Kubernetes label selector: a in (x,y),b!=z,c).',
  );
  const annotation = fs.string(
    'reschedule.annotation',
    DEFAULT_RESCHEDULE_ANNOTATION,
    'key=value annotation written on a pod to ask its operator to move it.',
  );
  const namespaces = fs.stringList(
    'reschedule.namespaces',
    [],
    'Comma-separated namespaces handled; empty or * means every namespace the webhook is called for (its namespaceSelector decides). Stateward needs to read pods and ConfigMaps there.',
  );
  const track = fs.bool(
    'reschedule.track',
    true,
    'Keep tracking records so a pod recreated under the same name releases the drain (404) once.',
  );
  const configMap = fs.string(
    'reschedule.tracking-config-map',
    DEFAULT_TRACKING_CONFIG_MAP,
    "ConfigMap, in each pod's namespace, holding the tracking records (keyed by pod UID).",
  );
  const ttl = fs.duration(
    'reschedule.record-ttl',
    DEFAULT_RECORD_TTL_MS,
    'How long a tracking record may release a same-name replacement.',
  );
  const more = registerProfileFlags(fs);
  return {
    enabled: () => enabled.value || more.strimziOn() || more.file.value !== '',
    read: () => {
      const errors: string[] = [];
      const profiles: RescheduleConfig[] = [];
      if (enabled.value) {
        const parsed = parseRescheduleConfig({
          selectors: [selector.value],
          annotation: annotation.value,
          namespaces: namespaces.value,
          track: track.value,
          trackingConfigMap: configMap.value,
          recordTtl: ttl.value,
        });
        if (parsed.ok) profiles.push(parsed.config);
        else errors.push(...parsed.errors.map((e) => `-reschedule.*: ${e}`));
      }
      const strimzi = more.strimzi();
      if ('errors' in strimzi) errors.push(...strimzi.errors);
      else if (strimzi.profile !== undefined) profiles.push(strimzi.profile);
      const fromFile = more.fileProfiles();
      if ('errors' in fromFile) errors.push(...fromFile.errors);
      else profiles.push(...fromFile.profiles);
      if (errors.length === 0) errors.push(...profilesProblems(profiles).map((e) => `-reschedule.*: ${e}`));
      if (errors.length > 0) return { errors };
      const strimziProfile = 'profile' in strimzi ? strimzi.profile : undefined;
      return strimziProfile ? { profiles, strimzi: strimziProfile } : { profiles };
    },
  };
}

/** -reschedule.profiles-file and the Strimzi Drain Cleaner flags, each with Drain Cleaner's variable. */
function registerProfileFlags(fs: FlagSet) {
  const file = fs.string(
    'reschedule.profiles-file',
    '',
    `YAML file of further reschedule profiles (docs/drain.md#reschedule-profiles), served at ${RESCHEDULE_PATH}.`,
  );
  const strimziEnabled = fs.bool(
    'reschedule.strimzi.enabled',
    false,
    `Add the Strimzi profile (Strimzi Drain Cleaner semantics), served at ${RESCHEDULE_PATH} and ${DRAINER_PATH}; on as soon as one of its variables is set.`,
  );
  const deny = fs.bool(
    'reschedule.strimzi.deny-eviction',
    true,
    "Strimzi profile: refuse the eviction of an annotated pod; false annotates and allows it (Drain Cleaner's legacy mode).",
    { env: 'STRIMZI_DENY_EVICTION' },
  );
  const kafka = fs.bool(
    'reschedule.strimzi.drain-kafka',
    true,
    'Strimzi profile: handle Kafka pods (strimzi.io/name .+-kafka).',
    {
      env: 'STRIMZI_DRAIN_KAFKA',
    },
  );
  const zookeeper = fs.bool(
    'reschedule.strimzi.drain-zookeeper',
    true,
    'Strimzi profile: handle ZooKeeper pods (strimzi.io/name .+-zookeeper).',
    { env: 'STRIMZI_DRAIN_ZOOKEEPER' },
  );
  const strimziNamespaces = fs.string(
    'reschedule.strimzi.namespaces',
    '',
    'Strimzi profile: comma-separated namespaces handled; empty or * means every namespace.',
    { env: 'STRIMZI_DRAIN_NAMESPACES' },
  );
  const denyCode = fs.int(
    'reschedule.strimzi.deny-code',
    429,
    'Strimzi profile: the code of a refusal, 429 (drains wait for the pod to move) or 500 (as Drain Cleaner: the drain fails and is run again).',
  );
  const strimziOn = () =>
    strimziEnabled.value || [deny, kafka, zookeeper, strimziNamespaces].some((f) => f.source !== 'default');
  const strimzi = (): { profile?: RescheduleConfig } | { errors: string[] } => {
    if (!strimziOn()) return {};
    const code = denyCode.value;
    if (code !== 429 && code !== 500)
      return { errors: [`-reschedule.strimzi.deny-code: ${code}: expected 429 or 500`] };
    const input = strimziProfileInput({
      denyEviction: deny.value,
      drainKafka: kafka.value,
      drainZooKeeper: zookeeper.value,
      namespaces: strimziNamespaces.value,
      denyCode: code,
    });
    if (!input.ok)
      return { errors: [`-reschedule.strimzi.drain-kafka, -reschedule.strimzi.drain-zookeeper: ${input.error}`] };
    const parsed = parseRescheduleConfig(input.input);
    // What the user gives the profile beyond booleans is its namespaces: errors name that flag (and its variable).
    return parsed.ok
      ? { profile: parsed.config }
      : { errors: parsed.errors.map((e) => `-reschedule.strimzi.namespaces (STRIMZI_DRAIN_NAMESPACES): ${e}`) };
  };
  const fileProfiles = (): { profiles: RescheduleConfig[] } | { errors: string[] } => {
    if (file.value === '') return { profiles: [] };
    const where = `-reschedule.profiles-file ${file.value}`;
    let text: string;
    try {
      text = readFileSync(file.value, 'utf8');
    } catch (error) {
      return { errors: [`${where}: cannot read it: ${error instanceof Error ? error.message : String(error)}`] };
    }
    const parsed = parseProfilesFile(text);
    return parsed.ok ? parsed : { errors: parsed.errors.map((e) => `${where}: ${e}`) };
  };
  return { file, strimziOn, strimzi, fileProfiles };
}

export interface RescheduleDeps {
  client: KubeClient;
  clock: Clock;
  log: Logger;
  registry: Registry;
  /** One profile, or several in order (the first that selects a pod judges it). */
  config: RescheduleConfig | readonly RescheduleConfig[];
  pods: Informer<Pod>[];
}

const failure = (error: unknown): LookupFailure => ({
  kind: 'failed',
  error: error instanceof Error ? error.message : String(error),
  transient: apiErrorIsTransient(error instanceof KubeApiError ? error.code : undefined),
});

/** The reschedule-on-eviction webhooks of one operator (every profile; the Strimzi one at /drainer too), wired to its runtime and the shared pod caches. */
export function rescheduleWebhooks(runtime: Runtime, read: RescheduleProfiles): [string, AdmissionHandler][] {
  const judge = rescheduleJudge({
    client: runtime.client,
    clock: runtime.clock,
    log: runtime.logger.child({ webhook: 'reschedule-on-eviction' }),
    registry: runtime.registry,
    config: read.profiles,
    pods: workloadCache(runtime).pods,
  });
  const paths: [string, AdmissionHandler][] = [[RESCHEDULE_PATH, judge(read.profiles)]];
  if (read.strimzi !== undefined) paths.push([DRAINER_PATH, judge([read.strimzi])]);
  return paths;
}

/** The handler judging every profile of deps.config. */
export function rescheduleHandler(deps: RescheduleDeps): AdmissionHandler {
  const profiles = Array.isArray(deps.config) ? deps.config : [deps.config as RescheduleConfig];
  return rescheduleJudge(deps)(profiles);
}

/** The reads and writes of the webhook, each failure turned into a LookupFailure or thrown for effectFailed. */
function rescheduleIo(deps: RescheduleDeps) {
  const { client } = deps;
  async function lookupPod(namespace: string, name: string, signal: AbortSignal): Promise<PodLookup> {
    const cached = informerFor(deps.pods, namespace)?.get(namespace, name);
    if (cached) return { kind: 'found', pod: cached };
    try {
      return { kind: 'found', pod: await client.get<Pod>(resources.pods, { namespace, name }, { signal }) };
    } catch (error) {
      return isNotFound(error) ? { kind: 'not-found' } : failure(error);
    }
  }

  async function lookupRecords(
    config: RescheduleConfig,
    namespace: string,
    signal: AbortSignal,
  ): Promise<RecordsLookup> {
    if (!config.track) return { kind: 'found', data: undefined };
    try {
      const cm = await client.get<ConfigMap>(
        resources.configMaps,
        { namespace, name: config.trackingConfigMap },
        { signal },
      );
      return { kind: 'found', data: cm.data ?? {} };
    } catch (error) {
      return isNotFound(error) ? { kind: 'found', data: undefined } : failure(error);
    }
  }

  async function lookupNode(name: string, signal: AbortSignal): Promise<NodeLookup> {
    try {
      return { kind: 'found', node: await client.get<Node>(resources.nodes, { name }, { signal }) };
    } catch (error) {
      return isNotFound(error) ? { kind: 'not-found' } : failure(error);
    }
  }

  async function perform(effect: RescheduleEffect, signal: AbortSignal): Promise<void> {
    if (effect.kind === 'annotate-pod') {
      // metadata.uid in the patch is a precondition: a replaced pod answers 409.
      await client.patch(resources.pods, { namespace: effect.namespace, name: effect.name }, 'merge', effect.patch, {
        signal,
      });
      return;
    }
    const where = { namespace: effect.namespace, name: effect.configMap };
    try {
      await client.patch(resources.configMaps, where, 'merge', effect.patch, { signal });
    } catch (error) {
      if (!isNotFound(error)) throw error;
      try {
        await client.create(resources.configMaps, newTrackingConfigMap(effect), { signal });
      } catch (raced) {
        if (!isAlreadyExists(raced)) throw raced;
        await client.patch(resources.configMaps, where, 'merge', effect.patch, { signal });
      }
    }
  }

  return { lookupPod, lookupRecords, lookupNode, perform };
}

/** Handlers over subsets of the profiles, sharing one set of metrics. */
function rescheduleJudge(deps: RescheduleDeps): (profiles: readonly RescheduleConfig[]) => AdmissionHandler {
  const { log } = deps;
  const answers = new Counter({
    name: 'stateward_reschedule_evictions_total',
    help: 'Evictions judged by the reschedule-on-eviction webhook, by outcome, answer code and whether it was a dry run.',
    labelNames: ['outcome', 'code', 'dry_run'],
    registers: [deps.registry],
  });
  const byProfile = new Counter({
    name: 'stateward_reschedule_profile_evictions_total',
    help: 'Evictions of selected pods judged by the reschedule-on-eviction webhook, by profile, outcome and answer code.',
    labelNames: ['profile', 'outcome', 'code'],
    registers: [deps.registry],
  });

  const { lookupPod, lookupRecords, lookupNode, perform } = rescheduleIo(deps);

  /**
   * The profile that judges this eviction, and the pod and records it needs:
   * no API call outside every profile's namespaces, no records read for a pod
   * no profile selects (the decision then only needs the pod).
   */
  async function gather(profiles: readonly RescheduleConfig[], facts: EvictionFacts, signal: AbortSignal) {
    const inScope = profilesInScope(profiles, facts.namespace);
    const none: RecordsLookup = { kind: 'found', data: undefined };
    if (profiles.length === 0) throw new Error('reschedule webhook served without a profile');
    // Out of every profile's scope, any profile decides 'not-in-scope' without looking at the pod.
    if (inScope.length === 0) return { config: profiles[0]!, pod: { kind: 'not-found' } as PodLookup, records: none };
    const pod = await lookupPod(facts.namespace, facts.name, signal);
    const chosen = pod.kind === 'found' ? chooseProfile(inScope, pod.pod) : undefined;
    if (chosen === undefined) return { config: inScope[0]!, pod, records: none };
    if (chosen.others.length > 0)
      log.warn('pod selected by several reschedule profiles; the first judges it', {
        namespace: facts.namespace,
        pod: facts.name,
        profiles: [chosen.profile, ...chosen.others].map(profileLabel).join('; '),
      });
    return { config: chosen.profile, pod, records: await lookupRecords(chosen.profile, facts.namespace, signal) };
  }

  const judge =
    (profiles: readonly RescheduleConfig[]): AdmissionHandler =>
    async (request, signal) => {
      const read = readEviction(request);
      if (!read.ok) return read.answer;
      const { facts } = read;
      const { config, pod, records } = await gather(profiles, facts, signal);
      const input = { eviction: facts, pod, records, config, now: deps.clock.now() };
      let decision = decideReschedule(input);
      // The node matters only before releasing a same-name replacement: read it then, not on every eviction.
      const nodeName = pod.kind === 'found' ? pod.pod.spec?.nodeName : undefined;
      if (decision.outcome === 'node-lookup-failed' && nodeName) {
        decision = decideReschedule({ ...input, podNode: await lookupNode(nodeName, signal) });
      }
      for (const warning of decision.logWarnings) log.warn(warning, { namespace: facts.namespace });
      let answer = decision.answer;
      for (const effect of decision.effects) {
        try {
          await perform(effect, signal);
        } catch (error) {
          const why = failure(error);
          log.warn('reschedule effect failed', {
            kind: effect.kind,
            namespace: facts.namespace,
            pod: facts.name,
            err: why.error,
          });
          answer = effectFailed(effect, why);
          break;
        }
      }
      const code = answer.allowed ? 200 : (answer.status?.code ?? 500);
      answers.inc({ outcome: decision.outcome, code: String(code), dry_run: String(decision.dryRun) });
      if (decision.outcome !== 'not-selected' && decision.outcome !== 'not-in-scope') {
        byProfile.inc({ profile: config.name ?? 'flags', outcome: decision.outcome, code: String(code) });
        log.info('eviction judged', {
          namespace: facts.namespace,
          pod: facts.name,
          ...(config.name !== undefined ? { profile: config.name } : {}),
          outcome: decision.outcome,
          code,
          dryRun: decision.dryRun,
        });
      }
      return answer;
    };
  return judge;
}
