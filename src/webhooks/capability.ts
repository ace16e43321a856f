// The admission-webhook capability: the HTTPS server (every replica), its
// certificate (self-signed in a Secret and renewed, or files reloaded on
// change), CA injection into labelled webhook configurations (leader), and
// the webhooks: no-downscale, its own, and those other capabilities define,
// which main.ts hands it.
import type { KubeObject, Secret } from '../runtime/kube/types.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../runtime/kube/errors.ts';
import { resources } from '../runtime/kube/types.ts';
import type { Capability, Runtime } from '../runtime/operator.ts';
import type { Informer } from '../runtime/informer/informer.ts';
import type { Logger } from '../runtime/log/logger.ts';
import type { AdmissionHandler } from '../runtime/admission/admission.ts';
import { CaInjector, WebhookConfigurations } from './cainjection.ts';
import type { WebhookConfig } from './config.ts';
import { noDownscaleHandler } from './nodownscale.ts';
import { scaleParentLabels } from './scaleparents.ts';
import { WebhookServer, type TlsPair } from '../runtime/admission/server.ts';
import { defaultDnsName, serviceDnsNames } from './tls/generate.ts';
import { pollCertificateSecret } from './tls/poll.ts';
import { CertificateRotator, watchCertFiles } from './tls/rotation.ts';
import { ensureCertificate, type CertificateStoreDeps } from './tls/store.ts';

export const NO_DOWNSCALE_PATH = '/admission/no-downscale';

/** The webhooks other capabilities define, by path; main.ts lists them. */
export type WebhookHandlers = (
  runtime: Runtime,
  config: WebhookConfig,
) => (readonly [path: string, handler: AdmissionHandler])[];

/**
 * How long a new CA is trusted alongside the old one before the new serving
 * certificate is used, and again before the old CA is dropped: long enough
 * for the API server to see the updated caBundle, so no handshake fails.
 */
const CA_PROPAGATION_MS = 10_000;

function secretStore(runtime: Runtime, namespace: string, name: string): CertificateStoreDeps {
  const client = runtime.client;
  return {
    get: () =>
      client.get<Secret>(resources.secrets, { namespace, name }, { timeoutMs: 10_000 }).catch((error: unknown) => {
        if (isNotFound(error)) return undefined;
        throw error;
      }),
    create: (data) =>
      client.create<Secret>(resources.secrets, { metadata: { name, namespace }, data }, { timeoutMs: 10_000 }),
    update: (secret, data) =>
      client.update<Secret>(resources.secrets, { ...(secret as Secret), data }, { timeoutMs: 10_000 }),
    isConflict,
    isAlreadyExists,
    clock: runtime.clock,
    log: runtime.logger.child({ component: 'webhook-certificate' }),
  };
}

/**
 * Rechecks the certificate when someone else changes or deletes its Secret:
 * from the watch, or, while the watch is refused, from a get every minute.
 */
function followSecret(
  runtime: Runtime,
  secret: Informer<KubeObject>,
  name: string,
  recheck: () => void,
  log: Logger,
): () => void {
  const namespace = runtime.config.namespace;
  const unwatch = secret.addHandlers({
    onAdd: (_secret, isInitialList) => isInitialList || recheck(),
    onUpdate: (before, after) => before.metadata?.resourceVersion === after.metadata?.resourceVersion || recheck(),
    onDelete: recheck,
  });
  const unpoll = pollCertificateSecret({
    watchRefused: () => secret.unavailable === 'forbidden',
    read: () =>
      runtime.client
        .get<KubeObject>(resources.secrets, { namespace, name }, { timeoutMs: 10_000, metadataOnly: true })
        .then(
          (found) => found.metadata?.resourceVersion,
          (error: unknown) => {
            if (isNotFound(error)) return undefined;
            throw error;
          },
        ),
    recheck,
    clock: runtime.clock,
    log,
  });
  return () => {
    unwatch();
    unpoll();
  };
}

export function webhooksCapability(read: () => WebhookConfig, others: WebhookHandlers): Capability {
  return {
    name: 'webhooks',
    setup(runtime) {
      const config = read();
      if (!config.tlsEnabled) return {};
      const namespace = runtime.config.namespace;
      const log = runtime.logger.child({ component: 'webhooks' });
      const configurations = new WebhookConfigurations(runtime, namespace);
      configurations.registerFailurePolicyGauge(runtime.registry);
      const injector =
        config.selfSigned && config.updateCaBundle
          ? new CaInjector(runtime, configurations, { onlyNames: config.caBundleConfigurations })
          : undefined;
      const handlers = new Map<string, AdmissionHandler>([
        ...others(runtime, config),
        [
          NO_DOWNSCALE_PATH,
          noDownscaleHandler({
            log: runtime.logger.child({ webhook: 'no-downscale' }),
            getParentLabels: scaleParentLabels(runtime),
          }),
        ],
      ]);

      // The certificate Secret, names only (its data never reaches the cache):
      // a change or delete by anyone else is looked at at once. Optional: a
      // Role without this watch (rollout-operator's) is polled by get instead
      // (tls/poll.ts), and notices within a minute.
      const certificateSecret = config.selfSigned
        ? runtime.informers<KubeObject>(resources.secrets, {
            ownNamespace: true,
            fieldSelector: `metadata.name=${config.secretName}`,
            metadataOnly: true,
            optional: true,
          })[0]
        : undefined;

      // Set once the certificate is known; the rotation callbacks and /ready read it.
      const live: { server?: WebhookServer } = {};
      // The Service must not send the API server's webhook calls to a replica
      // that cannot answer them yet (still creating or loading its certificate).
      runtime.readiness('webhooks', () =>
        live.server?.serving ? undefined : `the HTTPS server on port ${config.port} is not serving yet`,
      );
      const serve = async (signal: AbortSignal): Promise<void> => {
        const stops: (() => void)[] = [];
        let tls: TlsPair;
        if (config.selfSigned) {
          const dnsNames = serviceDnsNames(config.dnsName || defaultDnsName(namespace), namespace);
          const rotator = new CertificateRotator({
            ensure: () =>
              ensureCertificate(secretStore(runtime, namespace, config.secretName), {
                org: config.org,
                dnsNames,
                validityMs: config.expirationMs,
              }),
            clock: runtime.clock,
            log,
          });
          const first = await rotator.start();
          tls = first;
          injector?.setCa(first.ca);
          let trustedCa = first.ca;
          stops.push(() => rotator.stop());
          if (certificateSecret)
            stops.push(followSecret(runtime, certificateSecret, config.secretName, () => rotator.recheck(), log));
          rotator.onChange((next) => {
            // Trust old and new CA together, serve the new certificate once
            // the API server has seen that, then trust only the new CA.
            const previousCa = trustedCa;
            trustedCa = next.ca;
            injector?.setCa(`${next.ca}${previousCa}`);
            void runtime.clock.sleep(CA_PROPAGATION_MS, signal).then(
              async () => {
                live.server?.setCertificate(next);
                await runtime.clock.sleep(CA_PROPAGATION_MS, signal);
                if (trustedCa === next.ca) injector?.setCa(next.ca);
              },
              () => undefined,
            );
          });
        } else {
          const watch = await watchCertFiles(
            config.certFile,
            config.keyFile,
            (pair) => live.server?.setCertificate(pair),
            { clock: runtime.clock, log },
          );
          tls = watch.current;
          stops.push(() => watch.stop());
        }
        const server = new WebhookServer({
          port: config.port,
          requestTimeoutMs: config.requestTimeoutMs,
          idleTimeoutMs: config.idleTimeoutMs,
          maxConnections: config.maxConnections,
          maxConnectionsPerPeer: config.maxConnectionsPerPeer,
          bodyStallTimeoutMs: config.bodyStallTimeoutMs,
          maxInflightBodyBytes: config.maxInflightBodyBytes,
          registry: runtime.registry,
          logger: runtime.logger,
          tls,
          clusterValidation: runtime.config.clusterValidation,
        });
        live.server = server;
        for (const [path, handler] of handlers) server.handle(path, handler);
        await server.listen();
        await new Promise<void>((resolve) =>
          signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        for (const stop of stops) stop();
        await server.close(runtime.config.shutdownGraceMs);
      };
      return {
        serve,
        ...(injector ? { lead: (signal: AbortSignal) => injector.run(signal) } : {}),
      };
    },
  };
}
