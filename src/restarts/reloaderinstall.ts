// Reloader's install mode: Stateward running in Reloader's own chart (or
// manifests) with only the image swapped, under Reloader's RBAC. That RBAC
// grants list/get/watch on ConfigMaps and Secrets; list/get/update/patch on
// Deployments, DaemonSets and StatefulSets — no watch; list/get on CronJobs
// and create/delete/list/get on Jobs — no patch; core/v1 Events create/patch;
// get on Secrets, but no create. Every call Stateward makes here must be one
// of those, so a refused request never repeats in the apiserver's audit log:
//
// - only config restarts run (rollouts, webhooks, the web page need more);
// - workloads are kept current by LIST every POLL_INTERVAL_MS instead of a
//   watch (the informer's polling mode); configs stay watched, so a config
//   change is acted on at once, on the workloads of the last poll;
// - CronJobs and Jobs are not restarted: the applied record is written on
//   the CronJob, and a Job's re-creation holds it with a finalizer, both
//   patches the RBAC does not grant;
// - pods are not read: OnDelete evictions and the Secrets Store CSI
//   integration (which judges classes by the workload's pods) are off;
// - Events are written as core/v1 Events (coreevents.ts);
// - the checksum key Secret is not created: the install doc's one extra
//   step makes it, and without it the operator exits saying that command. An
//   in-memory key would change at each start and restart every workload.
import { coreEventSink } from '../runtime/events/coreevents.ts';
import type { KubeClient } from '../runtime/kube/client.ts';
import { isNotFound } from '../runtime/kube/errors.ts';
import { resources, type Secret } from '../runtime/kube/types.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Logger } from '../runtime/log/logger.ts';
import type { Capability } from '../runtime/operator.ts';
import { backoffDelay } from '../runtime/workqueue/ratelimiter.ts';
import { CHECKSUM_KEY_FIELD } from './checksumkey.ts';
import { restartsCapability, type RestartOptions } from './controller.ts';

/**
 * How often workloads are listed. 10 s: a workload created or changed is
 * known within 10 s (it matters only when a config it references changes in
 * that window; its first record is written at the next poll anyway), and
 * three cluster-wide LISTs per 10 s are 0.3 requests/s, a small share of the
 * client's 5/s, served by the apiserver's watch cache. Configs are watched,
 * so restart latency does not depend on it.
 */
export const POLL_INTERVAL_MS = 10_000;

/** What the config restarts do differently in Reloader's install. */
export interface ReloaderInstallMode {
  /** Workloads listed this often, never watched. */
  pollIntervalMs: number;
}

export const RELOADER_INSTALL_MODE: ReloaderInstallMode = { pollIntervalMs: POLL_INTERVAL_MS };

/** The one notice saying what runs in Reloader's install, what does not, and why. */
export function installNotice(activatedBy: readonly string[]): string {
  const env = activatedBy.filter((name) => !name.startsWith('--')).join(', ');
  return (
    `Reloader's install (${env} set): only config restarts run, within Reloader's RBAC. ` +
    `Off: rollouts, webhooks and the web page (its RBAC grants none of what they use); ` +
    `CronJob and Job restarts (no patch on them); OnDelete evictions and the Secrets Store CSI integration (no access to pods). ` +
    `Deployments, DaemonSets and StatefulSets are listed every ${POLL_INTERVAL_MS / 1000}s (list, not watch, granted); ` +
    `Events are core/v1. Install Stateward's own chart for all of it.`
  );
}

/** The exact command the install doc gives for the checksum key Secret. */
export function keySecretCommand(namespace: string, name: string): string {
  return `kubectl -n ${namespace} create secret generic ${name} --from-literal=${CHECKSUM_KEY_FIELD}=$(openssl rand -hex 32)`;
}

/** The one-line error of a missing key Secret in Reloader's install. */
export function missingKeyMessage(namespace: string, name: string): string {
  return `Reloader's install cannot create the checksum key Secret ${namespace}/${name} (its RBAC grants no Secret create); create it once with: ${keySecretCommand(namespace, name)}`;
}

/** Thrown when the key Secret is missing: the operator exits with its message. */
export class MissingKeySecretError extends Error {}

/**
 * Waits until the key Secret can be read (a transient failure is retried,
 * backing off to 30 s); throws MissingKeySecretError at once if it does not
 * exist. Reading only: never a create that the RBAC would refuse.
 */
export async function requireKeySecret(
  client: KubeClient,
  namespace: string,
  name: string,
  options: { signal: AbortSignal; clock: Clock; log?: Logger },
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.get<Secret>(resources.secrets, { namespace, name }, { signal: options.signal });
      return;
    } catch (error) {
      if (isNotFound(error)) throw new MissingKeySecretError(missingKeyMessage(namespace, name));
      if (options.signal.aborted) throw options.signal.reason;
      const delayMs = backoffDelay(attempt, { initialMs: 500, maxMs: 30_000, spread: 0.2 });
      options.log?.warn('config restarts wait for their checksum key', {
        secret: `${namespace}/${name}`,
        err: error instanceof Error ? error.message : String(error),
        retryInMs: Math.round(delayMs),
      });
      await options.clock.sleep(delayMs, options.signal);
    }
  }
}

/**
 * Runs before the config restarts set up: Events as core/v1 from now on, and
 * the key Secret required (`keySecret`: its name, or undefined when config
 * restarts are off and need none).
 */
export function reloaderInstallCapability(keySecret: () => string | undefined): Capability {
  return {
    name: 'reloader-install',
    async setup(runtime) {
      runtime.events.useSink(coreEventSink(runtime.client));
      const name = keySecret();
      if (name !== undefined)
        await requireKeySecret(runtime.client, runtime.config.namespace, name, {
          signal: runtime.stopping,
          clock: runtime.clock,
          log: runtime.logger,
        });
      return {};
    },
  };
}

/** The capabilities of Reloader's install: the check above, then the config restarts, nothing else. */
export function reloaderInstallCapabilities(restarts: () => RestartOptions): Capability[] {
  const keySecret = () => {
    const o = restarts();
    return o.enabled ? o.checksumKeySecret : undefined;
  };
  return [reloaderInstallCapability(keySecret), restartsCapability(restarts)];
}
