// CA injection: every Validating/MutatingWebhookConfiguration labelled
// grafana.com/inject-rollout-operator-ca=true and grafana.com/namespace=<ns>
// gets our CA in each webhook's clientConfig.caBundle — at start, when one
// is created later, and again whenever someone changes or wipes it.
//
// Unlike rollout-operator, the informer's cached objects are never mutated,
// and the write is a JSON patch that tests each webhook's name at its index
// before setting its caBundle: a concurrent edit that reorders or removes
// webhooks makes the patch fail (and retry) instead of writing the wrong entry.
import { Gauge, type Registry } from 'prom-client';
import type { Informer } from '../runtime/informer/informer.ts';
import { isConflict, isInvalid, isNotFound } from '../runtime/kube/errors.ts';
import type { KubeObject, ResourceType } from '../runtime/kube/types.ts';
import { resources } from '../runtime/kube/types.ts';
import type { Logger } from '../runtime/log/logger.ts';
import type { Runtime } from '../runtime/operator.ts';
import { Controller, type Reconciler } from '../runtime/controller/runner.ts';
import { INJECT_LABEL, NAMESPACE_LABEL } from '../vocabulary/keys.ts';

export interface WebhookConfiguration extends KubeObject {
  webhooks?: {
    name: string;
    failurePolicy?: string;
    clientConfig?: { caBundle?: string; url?: string; service?: unknown };
  }[];
}

const KINDS = [
  { type: resources.validatingWebhookConfigurations, metricType: 'ValidatingWebhook' },
  { type: resources.mutatingWebhookConfigurations, metricType: 'MutatingWebhook' },
] as const;

/** The JSON patch that sets caBundle on every webhook that lacks it; undefined when none does. */
export function caBundlePatch(config: WebhookConfiguration, caBundle: string): object[] | undefined {
  const ops: object[] = [];
  (config.webhooks ?? []).forEach((webhook, i) => {
    if (webhook.clientConfig?.caBundle === caBundle) return;
    ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: webhook.name });
    ops.push({ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: caBundle });
  });
  return ops.length > 0 ? ops : undefined;
}

export class WebhookConfigurations {
  readonly informers: { type: ResourceType; metricType: string; informer: Informer<WebhookConfiguration> }[];

  constructor(runtime: Runtime, namespace: string) {
    this.informers = KINDS.map(({ type, metricType }) => ({
      type,
      metricType,
      informer: runtime.informers<WebhookConfiguration>(type, {
        labelSelector: `${NAMESPACE_LABEL}=${namespace}`,
        resyncPeriodMs: 5 * 60_000,
      })[0]!,
    }));
  }

  /**
   * kube_validating_webhook_failure_policy{type, webhook, policy}: 1 for the
   * webhook's current policy, 0 for the other (nil counts as Fail), computed
   * at scrape time, so a deleted configuration's entries disappear (rollout-operator never removes them).
   */
  registerFailurePolicyGauge(registry: Registry): void {
    const informers = this.informers;
    new Gauge({
      name: 'kube_validating_webhook_failure_policy',
      help: 'Failure policy of the webhooks in configurations labelled for this operator: 1 for the current policy.',
      labelNames: ['type', 'webhook', 'policy'],
      registers: [registry],
      collect() {
        this.reset();
        for (const { metricType, informer } of informers) {
          for (const config of informer.list()) {
            for (const webhook of config.webhooks ?? []) {
              const policy = webhook.failurePolicy === 'Ignore' ? 'Ignore' : 'Fail';
              this.set({ type: metricType, webhook: webhook.name, policy }, 1);
              this.set({ type: metricType, webhook: webhook.name, policy: policy === 'Fail' ? 'Ignore' : 'Fail' }, 0);
            }
          }
        }
      },
    });
  }
}

export class CaInjector implements Reconciler {
  private readonly runtime: Runtime;
  private readonly configs: WebhookConfigurations;
  private readonly onlyNames: ReadonlySet<string> | undefined;
  private readonly log: Logger;
  private caBundle: string | undefined;
  /** The term-scoped loop: one worker over configuration keys while leading (its queue is not measured). */
  private readonly controller: Controller;

  constructor(runtime: Runtime, configs: WebhookConfigurations, options: { onlyNames?: readonly string[] } = {}) {
    this.runtime = runtime;
    this.configs = configs;
    this.onlyNames = options.onlyNames && options.onlyNames.length > 0 ? new Set(options.onlyNames) : undefined;
    this.log = runtime.logger.child({ component: 'ca-injection' });
    this.controller = new Controller({
      runtime,
      reconciler: this,
      workers: 1,
      failures: { logger: this.log, message: 'CA injection failed; retrying', keyField: 'configuration' },
      enqueueAll: () => this.enqueueAll(),
    });
    for (const { type, informer } of configs.informers) {
      const enqueue = (c: WebhookConfiguration) => this.enqueue(type, c);
      informer.addHandlers({ onAdd: enqueue, onUpdate: (_old, c) => enqueue(c) });
    }
  }

  private enqueue(type: ResourceType, config: WebhookConfiguration): void {
    const name = config.metadata?.name;
    if (name && config.metadata?.labels?.[INJECT_LABEL] === 'true' && (!this.onlyNames || this.onlyNames.has(name))) {
      this.controller.add(`${type.resource}/${name}`);
    }
  }

  /** Sets the CA to inject (PEM) and re-checks every configuration. */
  setCa(caPem: string): void {
    this.caBundle = Buffer.from(caPem).toString('base64');
    this.enqueueAll();
  }

  private enqueueAll(): void {
    for (const { type, informer } of this.configs.informers)
      for (const config of informer.list()) this.enqueue(type, config);
  }

  /** Runs while this replica leads: every labelled configuration is looked at, then each change. */
  run(signal: AbortSignal): Promise<void> {
    return this.controller.run(signal);
  }

  /** Injects the CA into one configuration (`<resource>/<name>`) where a webhook lacks it. */
  async reconcile(key: string): Promise<void> {
    if (!this.caBundle) return;
    const [resource, name] = key.split('/') as [string, string];
    const entry = this.configs.informers.find((i) => i.type.resource === resource)!;
    const config = entry.informer.get(undefined, name);
    if (!config) return;
    const patch = caBundlePatch(config, this.caBundle);
    if (!patch) return;
    try {
      await this.runtime.client.patch(entry.type, { name }, 'json', patch, { timeoutMs: 10_000 });
      this.log.info('injected the CA bundle', { kind: entry.type.kind, name, webhooks: patch.length / 2 });
    } catch (error) {
      if (isNotFound(error)) return;
      // A failed test op (422) or a conflict: the object changed under us; the
      // update event brings the new version and we try again from it.
      if (isInvalid(error) || isConflict(error))
        throw new Error(`${entry.type.kind} ${name} changed while injecting; will retry`);
      throw error;
    }
  }
}
