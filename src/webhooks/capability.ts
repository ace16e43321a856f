// The admission-webhook capability: the HTTPS server (every replica), its
// certificate (self-signed in a Secret and renewed, or files reloaded on
// change), CA injection into labelled webhook configurations (leader), and
// the webhooks: no-downscale, its own, and those other capabilities define,
// which main.ts hands it.
import type { Capability, Runtime } from '../runtime/operator.ts';
import type { AdmissionHandler } from '../runtime/admission/admission.ts';
import { CaInjector, WebhookConfigurations } from './cainjection.ts';
import { WebhookCertificate } from './certificate.ts';
import type { WebhookConfig } from './webhookflags.ts';
import { noDownscaleHandler } from './nodownscale.ts';
import { scaleParentLabels } from './scaleparents.ts';
import { WebhookServer } from '../runtime/admission/webhookserver.ts';

export const NO_DOWNSCALE_PATH = '/admission/no-downscale';

/** The webhooks other capabilities define, by path; main.ts lists them. */
export type WebhookHandlers = (
  runtime: Runtime,
  config: WebhookConfig,
) => (readonly [path: string, handler: AdmissionHandler])[];

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

      const certificate = new WebhookCertificate(runtime, config, injector, log);
      runtime.readiness('webhooks', () => certificate.notServingReason());
      const serve = async (signal: AbortSignal): Promise<void> => {
        const tls = await certificate.load(signal);
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
        certificate.servedBy(server);
        for (const [path, handler] of handlers) server.handle(path, handler);
        await server.listen();
        await new Promise<void>((resolve) =>
          signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true }),
        );
        certificate.stop();
        await server.close(runtime.config.shutdownGraceMs);
      };
      return {
        serve,
        ...(injector ? { lead: (signal: AbortSignal) => injector.run(signal) } : {}),
      };
    },
  };
}
