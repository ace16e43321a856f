// The webhook server's certificate, on every replica: self-signed in a
// Secret and renewed (tls/rotation.ts, tls/certificatestore.ts), or read from files and
// reloaded when they change. A renewal that brings a new CA is rolled out in
// three steps so that no handshake fails: the webhooks trust the old and the
// new CA together, the new certificate is served once the API server has
// seen that, and the old CA is dropped after the same wait again.
import type { KubeObject, Secret } from '../runtime/kube/types.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../runtime/kube/errors.ts';
import { resources } from '../runtime/kube/types.ts';
import type { Runtime } from '../runtime/operator.ts';
import type { Informer } from '../runtime/informer/informer.ts';
import type { Logger } from '../runtime/log/logger.ts';
import type { WebhookServer, TlsPair } from '../runtime/admission/webhookserver.ts';
import type { CaInjector } from './cainjection.ts';
import type { WebhookConfig } from './webhookflags.ts';
import { defaultDnsName, serviceDnsNames } from './tls/generate.ts';
import { pollCertificateSecret } from './tls/poll.ts';
import { CertificateRotator, watchCertFiles } from './tls/rotation.ts';
import { ensureCertificate, type CertificateStoreDeps, type EnsuredCertificate } from './tls/certificatestore.ts';

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

export class WebhookCertificate {
  private readonly runtime: Runtime;
  private readonly config: WebhookConfig;
  private readonly injector: CaInjector | undefined;
  private readonly log: Logger;
  /**
   * The certificate Secret, names only (its data never reaches the cache):
   * a change or delete by anyone else is looked at at once. Optional: a Role
   * without this watch (rollout-operator's) is polled by get instead
   * (tls/poll.ts), and notices within a minute.
   */
  private readonly secret: Informer<KubeObject> | undefined;
  /** Set once the certificate is known; certificate changes and /ready read it. */
  private server: WebhookServer | undefined;
  /** The CA of the newest certificate: the only one the webhooks trust once its rotation is over. */
  private trustedCa = '';
  private readonly stops: (() => void)[] = [];

  /** In setup: the Secret's informer must be registered before the caches start. */
  constructor(runtime: Runtime, config: WebhookConfig, injector: CaInjector | undefined, log: Logger) {
    this.runtime = runtime;
    this.config = config;
    this.injector = injector;
    this.log = log;
    this.secret = config.selfSigned
      ? runtime.informers<KubeObject>(resources.secrets, {
          ownNamespace: true,
          fieldSelector: `metadata.name=${config.secretName}`,
          metadataOnly: true,
          optional: true,
        })[0]
      : undefined;
  }

  /**
   * Why /ready says no: the Service must not send the API server's webhook
   * calls to a replica that cannot answer them yet (still creating or
   * loading its certificate).
   */
  notServingReason(): string | undefined {
    return this.server?.serving ? undefined : `the HTTPS server on port ${this.config.port} is not serving yet`;
  }

  /**
   * The first certificate, to start the server with; from then on it is kept
   * fresh until stop(). `signal` ends the waits of a CA rotation.
   */
  async load(signal: AbortSignal): Promise<TlsPair> {
    return this.config.selfSigned ? this.loadSelfSigned(signal) : this.loadFiles();
  }

  /** The server the certificate is served on: later certificates are swapped into it. */
  servedBy(server: WebhookServer): void {
    this.server = server;
  }

  stop(): void {
    for (const stop of this.stops) stop();
  }

  private async loadSelfSigned(signal: AbortSignal): Promise<TlsPair> {
    const { config, runtime } = this;
    const namespace = runtime.config.namespace;
    const dnsNames = serviceDnsNames(config.dnsName || defaultDnsName(namespace), namespace);
    const rotator = new CertificateRotator({
      ensure: () =>
        ensureCertificate(secretStore(runtime, namespace, config.secretName), {
          org: config.org,
          dnsNames,
          validityMs: config.expirationMs,
        }),
      clock: runtime.clock,
      log: this.log,
    });
    const first = await rotator.start();
    this.injector?.setCa(first.ca);
    this.trustedCa = first.ca;
    this.stops.push(() => rotator.stop());
    if (this.secret) this.stops.push(this.followSecret(this.secret, () => rotator.recheck()));
    rotator.onChange((next) => this.rotateTo(next, signal));
    return first;
  }

  private async loadFiles(): Promise<TlsPair> {
    const watch = await watchCertFiles(
      this.config.certFile,
      this.config.keyFile,
      (pair) => this.server?.setCertificate(pair),
      { clock: this.runtime.clock, log: this.log },
    );
    this.stops.push(() => watch.stop());
    return watch.current;
  }

  /**
   * A renewed certificate: the three CA-overlap steps, each after the API
   * server has had time to see the one before.
   */
  private rotateTo(next: EnsuredCertificate, signal: AbortSignal): void {
    this.trustNewCaAlongsideOld(next.ca);
    const steps = async () => {
      await this.runtime.clock.sleep(CA_PROPAGATION_MS, signal);
      this.serveNewCertificate(next);
      await this.runtime.clock.sleep(CA_PROPAGATION_MS, signal);
      this.dropOldCa(next.ca);
    };
    // Either wait ends early when the process shuts down (the sleep rejects):
    // the rotation simply stops there, as nothing serves afterwards.
    steps().catch(() => undefined);
  }

  /** Step 1: every caBundle holds the new CA and the one trusted until now. */
  private trustNewCaAlongsideOld(newCa: string): void {
    const previousCa = this.trustedCa;
    this.trustedCa = newCa;
    this.injector?.setCa(`${newCa}${previousCa}`);
  }

  /** Step 2: the server presents the new certificate, which the webhooks trust by now. */
  private serveNewCertificate(next: TlsPair): void {
    this.server?.setCertificate(next);
  }

  /** Step 3: only the new CA is trusted, unless a later renewal began its own overlap meanwhile. */
  private dropOldCa(newCa: string): void {
    if (this.trustedCa === newCa) this.injector?.setCa(newCa);
  }

  /**
   * Rechecks the certificate when someone else changes or deletes its Secret:
   * from the watch, or, while the watch is refused, from a get every minute.
   */
  private followSecret(secret: Informer<KubeObject>, recheck: () => void): () => void {
    const { runtime } = this;
    const namespace = runtime.config.namespace;
    const name = this.config.secretName;
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
      log: this.log,
    });
    return () => {
      unwatch();
      unpoll();
    };
  }
}
