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
  apiErrorIsTransient,
  decideReschedule,
  effectFailed,
  newTrackingConfigMap,
  readEviction,
  type LookupFailure,
  type NodeLookup,
  type PodLookup,
  type RecordsLookup,
  type RescheduleEffect,
} from './decide.ts';

export const RESCHEDULE_PATH = '/admission/reschedule-on-eviction';

/** -reschedule.* flags; read() fails with every problem at once. */
export function registerRescheduleFlags(fs: FlagSet): {
  enabled: () => boolean;
  read: () => { config: RescheduleConfig } | { errors: string[] };
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
  return {
    enabled: () => enabled.value,
    read: () => {
      const parsed = parseRescheduleConfig({
        selectors: [selector.value],
        annotation: annotation.value,
        namespaces: namespaces.value,
        track: track.value,
        trackingConfigMap: configMap.value,
        recordTtl: ttl.value,
      });
      return parsed.ok ? { config: parsed.config } : { errors: parsed.errors.map((e) => `-reschedule.*: ${e}`) };
    },
  };
}

export interface RescheduleDeps {
  client: KubeClient;
  clock: Clock;
  log: Logger;
  registry: Registry;
  config: RescheduleConfig;
  pods: Informer<Pod>[];
}

const failure = (error: unknown): LookupFailure => ({
  kind: 'failed',
  error: error instanceof Error ? error.message : String(error),
  transient: apiErrorIsTransient(error instanceof KubeApiError ? error.code : undefined),
});

/** The reschedule-on-eviction webhook of one operator, wired to its runtime and the shared pod caches. */
export function rescheduleWebhook(runtime: Runtime, config: RescheduleConfig): AdmissionHandler {
  return rescheduleHandler({
    client: runtime.client,
    clock: runtime.clock,
    log: runtime.logger.child({ webhook: 'reschedule-on-eviction' }),
    registry: runtime.registry,
    config,
    pods: workloadCache(runtime).pods,
  });
}

export function rescheduleHandler(deps: RescheduleDeps): AdmissionHandler {
  const { client, config, log } = deps;
  const answers = new Counter({
    name: 'stateward_reschedule_evictions_total',
    help: 'Evictions judged by the reschedule-on-eviction webhook, by outcome, answer code and whether it was a dry run.',
    labelNames: ['outcome', 'code', 'dry_run'],
    registers: [deps.registry],
  });

  async function lookupPod(namespace: string, name: string, signal: AbortSignal): Promise<PodLookup> {
    const cached = informerFor(deps.pods, namespace)?.get(namespace, name);
    if (cached) return { kind: 'found', pod: cached };
    try {
      return { kind: 'found', pod: await client.get<Pod>(resources.pods, { namespace, name }, { signal }) };
    } catch (error) {
      return isNotFound(error) ? { kind: 'not-found' } : failure(error);
    }
  }

  async function lookupRecords(namespace: string, signal: AbortSignal): Promise<RecordsLookup> {
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

  return async (request, signal) => {
    const read = readEviction(request);
    if (!read.ok) return read.answer;
    const { facts } = read;
    const pod = await lookupPod(facts.namespace, facts.name, signal);
    const records = await lookupRecords(facts.namespace, signal);
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
      log.info('eviction judged', {
        namespace: facts.namespace,
        pod: facts.name,
        outcome: decision.outcome,
        code,
        dryRun: decision.dryRun,
      });
    }
    return answer;
  };
}
