// The certificate Secret's changes without a watch on it. Stateward watches
// the Secret (names only) to recheck at once when someone else changes or
// deletes it; a Role without list/watch on Secrets (grafana's Helm chart for
// rollout-operator grants only get, update and create on it) refuses that
// watch, and the informer then looks again only every 5 minutes. Meanwhile
// this looks at the Secret with a GET, which such a Role grants, every
// intervalMs, and rechecks when its resourceVersion changed or it is gone:
// a deleted certificate comes back within intervalMs, not at the next start.
// While the watch works it makes no request. A GET refused too stops it
// (said once): the certificate is then renewed only at its renewAt.
import type { Clock, Timer } from '../../runtime/clock.ts';
import { isForbidden } from '../../runtime/kube/errors.ts';
import type { Logger } from '../../runtime/log/logger.ts';

/** How often the Secret is read while its watch is refused. */
export const SECRET_POLL_MS = 60_000;

export interface SecretPollOptions {
  /** True while the watch on the Secret is not permitted. */
  watchRefused: () => boolean;
  /** The Secret's resourceVersion, or undefined when it does not exist. */
  read: () => Promise<string | undefined>;
  /** Look at the stored certificate now (CertificateRotator.recheck). */
  recheck: () => void;
  clock: Clock;
  log: Logger;
  intervalMs?: number;
}

/** Starts polling; returns the function that stops it. */
export function pollCertificateSecret(options: SecretPollOptions): () => void {
  const { clock, log } = options;
  const intervalMs = options.intervalMs ?? SECRET_POLL_MS;
  let timer: Timer | undefined;
  let stopped = false;
  let told = false;
  // The version the last look saw; null: not looked yet.
  let seen: string | undefined | null = null;
  const look = async (): Promise<boolean> => {
    if (!options.watchRefused()) {
      seen = null;
      return true;
    }
    if (!told) {
      told = true;
      log.warn(
        `not permitted to watch the certificate Secret: a change or delete by someone else is noticed within ${intervalMs / 1000}s (by get) instead of at once; grant list, watch on it (deploy/kustomize/rbac/PERMISSIONS.md)`,
      );
    }
    let version: string | undefined;
    try {
      version = await options.read();
    } catch (error) {
      const err = error instanceof Error ? error.message : String(error);
      if (!isForbidden(error)) {
        log.debug('reading the certificate Secret failed; looking again later', { err });
        return true;
      }
      log.warn(
        'not permitted to get the certificate Secret either: it is renewed only when due; grant get, list, watch on it (deploy/kustomize/rbac/PERMISSIONS.md)',
        { err },
      );
      return false;
    }
    if (version === undefined || (seen !== null && version !== seen)) options.recheck();
    seen = version;
    return true;
  };
  const next = () => {
    if (stopped) return;
    timer = clock.setTimer(intervalMs, () => {
      void look().then((again) => again && next());
    });
  };
  next();
  return () => {
    stopped = true;
    timer?.cancel();
  };
}
