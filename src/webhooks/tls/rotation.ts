// Keeping the webhook server's certificate fresh without a restart.
//
// rollout-operator sets a timer at the certificate's NotAfter that stops the
// process, and relies on the kubelet restarting it to get a new certificate;
// a cert-manager rotation of -server-tls.cert-file/-key-file is not noticed
// at all. Stateward instead swaps the new pair into the running server
// (the listener calls server.setSecureContext):
//   - CertificateRotator: self-signed mode; calls ensure (certificatestore.ts) again at
//     renewAt, and at once when the Secret changes or is deleted under it
//     (recheck), and tells listeners when the certificate changed (another
//     replica may have renewed first; ensure then adopts its certificate;
//     a deleted Secret is issued anew, where rollout-operator serves the
//     vanished certificate until it expires);
//   - watchCertFiles: file mode; re-reads the files when their content
//     changes, and swaps in only a pair that parses and matches.
import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Clock, Timer } from '../../runtime/clock.ts';
import { type Logger, nopLogger } from '../../runtime/log/logger.ts';
import { parseBundle } from './bundle.ts';
import type { EnsuredCertificate } from './certificatestore.ts';

/**
 * Longest single timer. Node's setTimeout overflows past ~24.8 days (and
 * then fires after 1ms), and a certificate lives a year; waking daily and
 * re-checking the time also copes with a host that slept.
 */
export const MAX_TIMER_MS = 86_400_000;

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export interface RotatorOptions {
  /** Reads, reuses or renews the certificate Secret: ensureCertificate bound to its deps and options. */
  ensure: () => Promise<EnsuredCertificate>;
  clock: Clock;
  log?: Logger;
  /** Delay before retrying a failed renewal; default 30s. */
  retryMs?: number;
}

export type CertificateListener = (bundle: EnsuredCertificate) => void;

export class CertificateRotator {
  private readonly ensure: () => Promise<EnsuredCertificate>;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly retryMs: number;
  private readonly listeners = new Set<CertificateListener>();
  private bundle: EnsuredCertificate | undefined;
  private timer: Timer | undefined;
  private stopped = false;
  /** A renewal is running; `again`: a recheck came meanwhile and needs one more. */
  private renewing: { again: boolean } | undefined;

  constructor(options: RotatorOptions) {
    this.ensure = options.ensure;
    this.clock = options.clock;
    this.log = options.log ?? nopLogger;
    this.retryMs = options.retryMs ?? 30_000;
  }

  /** The certificate being served; undefined before start() resolved. */
  get current(): EnsuredCertificate | undefined {
    return this.bundle;
  }

  /** Called with each new certificate after the first; returns an unsubscribe function. */
  onChange(listener: CertificateListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** Ensures the first certificate (rejecting if that fails) and schedules its renewal. */
  async start(): Promise<EnsuredCertificate> {
    const bundle = await this.ensure();
    if (!this.stopped) {
      this.bundle = bundle;
      this.scheduleAt(bundle.renewAt);
    }
    return bundle;
  }

  /**
   * Looks at the stored certificate now, not at renewAt: the Secret was
   * changed or deleted by someone else (a user, another replica). A recheck
   * while one runs is folded into one more run after it.
   */
  recheck(): void {
    if (this.stopped || this.bundle === undefined) return;
    void this.renew();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
  }

  /**
   * Renews at the wall-clock instant `at` (a certificate's renewAt is a
   * wall-clock time): a timer that fires early, because the wall clock
   * stepped back or the wait was longer than one timer, waits again.
   */
  private scheduleAt(at: number): void {
    if (this.stopped) return;
    this.timer?.cancel();
    const delay = Math.max(0, at - this.clock.now());
    this.timer = this.clock.setTimer(Math.min(delay, MAX_TIMER_MS), () => {
      this.timer = undefined;
      if (this.clock.now() < at) this.scheduleAt(at);
      else void this.renew();
    });
  }

  /** Renews after `ms` of real time (a retry): not re-checked against the wall clock, which may step. */
  private scheduleIn(ms: number): void {
    if (this.stopped) return;
    this.timer?.cancel();
    this.timer = this.clock.setTimer(ms, () => {
      this.timer = undefined;
      void this.renew();
    });
  }

  private async renew(): Promise<void> {
    if (this.renewing) {
      this.renewing.again = true;
      return;
    }
    const run = (this.renewing = { again: false });
    try {
      await this.renewOnce();
    } finally {
      this.renewing = undefined;
    }
    if (run.again && !this.stopped) await this.renew();
  }

  private async renewOnce(): Promise<void> {
    let next: EnsuredCertificate;
    try {
      next = await this.ensure();
    } catch (e) {
      if (this.stopped) return;
      this.log.warn('renewing the webhook certificate failed; retrying', { err: message(e), retryInMs: this.retryMs });
      this.scheduleIn(this.retryMs);
      return;
    }
    if (this.stopped) return;
    const changed = next.cert !== this.bundle?.cert || next.key !== this.bundle?.key;
    this.bundle = next;
    // A renewAt already past would spin; wait retryMs instead.
    if (next.renewAt > this.clock.now()) this.scheduleAt(next.renewAt);
    else this.scheduleIn(this.retryMs);
    if (!changed) return;
    this.log.info('webhook certificate renewed', { notAfter: new Date(next.notAfter).toISOString() });
    for (const listener of this.listeners) {
      try {
        listener(next);
      } catch (e) {
        this.log.error('webhook certificate listener failed', { err: message(e) });
      }
    }
  }
}

export interface FileCertificate {
  cert: string;
  key: string;
  notBefore: number;
  notAfter: number;
  dnsNames: string[];
}

export interface WatchCertFilesOptions {
  clock: Clock;
  /** Poll interval; default 60s. Polling always runs, fs.watch only speeds it up. */
  pollMs?: number;
  log?: Logger;
  /** Also react to fs.watch events on the files' directories; default true. */
  fsWatch?: boolean;
}

export interface CertFileWatch {
  /** The pair being served. */
  readonly current: FileCertificate;
  /** Re-reads the files now; resolves true if a new pair was swapped in. */
  check(): Promise<boolean>;
  stop(): void;
}

function contentHash(cert: string, key: string): string {
  return createHash('sha256').update(cert).update('\0').update(key).digest('hex');
}

/**
 * Watches -server-tls.cert-file/-key-file. Reads them first, rejecting if
 * that pair is unreadable, mismatched or expired (rollout-operator exits in
 * that case too). Afterwards, whenever the files' content changes, the new
 * pair is validated: a good one becomes current and goes to onChange; a bad
 * one (half-written, mismatched, expired) is ignored with a warning, once per
 * distinct content, and the previous pair stays in service.
 *
 * The directories are watched rather than the files: Kubernetes Secret
 * volumes (cert-manager) replace files by swapping a `..data` symlink, which
 * a watch on the old file never sees.
 */
export async function watchCertFiles(
  certFile: string,
  keyFile: string,
  onChange: (pair: FileCertificate) => void,
  options: WatchCertFilesOptions,
): Promise<CertFileWatch> {
  const initial = await readPair(certFile, keyFile);
  const first = parseBundle(initial, options.clock.now());
  if (!first.ok) throw new Error(`TLS certificate files ${certFile} and ${keyFile} are unusable: ${first.reason}`);
  const watch = new CertFilesWatch({ certFile, keyFile }, onChange, options, {
    ...initial,
    notBefore: first.notBefore,
    notAfter: first.notAfter,
    dnsNames: first.dnsNames,
  });
  watch.start(options.fsWatch ?? true);
  return watch;
}

async function readPair(certFile: string, keyFile: string): Promise<{ cert: string; key: string }> {
  const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  return { cert, key };
}

/**
 * watchCertFiles' state: the pair in service and its content hash, and the
 * last content seen, so that a bad pair is judged (and warned about) once
 * per distinct content rather than at every poll.
 */
class CertFilesWatch implements CertFileWatch {
  private readonly files: { certFile: string; keyFile: string };
  private readonly onChange: (pair: FileCertificate) => void;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly pollMs: number;
  private currentPair: FileCertificate;
  private currentHash: string;
  private lastHash: string;
  private stopped = false;
  private timer: Timer | undefined;
  private watchers: FSWatcher[] = [];
  /** Re-reads the files now, one check at a time (a poll and an fs.watch event share one). */
  readonly check: () => Promise<boolean> = oneAtATime(() => this.checkFiles());

  constructor(
    files: { certFile: string; keyFile: string },
    onChange: (pair: FileCertificate) => void,
    options: WatchCertFilesOptions,
    first: FileCertificate,
  ) {
    this.files = files;
    this.onChange = onChange;
    this.clock = options.clock;
    this.log = options.log ?? nopLogger;
    this.pollMs = options.pollMs ?? 60_000;
    this.currentPair = first;
    this.currentHash = contentHash(first.cert, first.key);
    this.lastHash = this.currentHash;
  }

  get current(): FileCertificate {
    return this.currentPair;
  }

  /** Polling always runs; fs.watch on the files' directories only speeds it up. */
  start(fsWatch: boolean): void {
    this.poll();
    if (fsWatch)
      this.watchers = watchDirectories(
        [dirname(this.files.certFile), dirname(this.files.keyFile)],
        () => void this.check(),
        this.log,
      );
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    for (const w of this.watchers) w.close();
  }

  private poll(): void {
    if (this.stopped) return;
    this.timer = this.clock.setTimer(this.pollMs, () => {
      void this.check().then(
        () => this.poll(),
        (e: unknown) => {
          this.log.warn('checking the TLS certificate files failed', { ...this.files, err: message(e) });
          this.poll();
        },
      );
    });
  }

  private async checkFiles(): Promise<boolean> {
    const { files, log } = this;
    if (this.stopped) return false;
    let pair: { cert: string; key: string };
    try {
      pair = await readPair(files.certFile, files.keyFile);
    } catch (e) {
      const hash = `unreadable:${message(e)}`;
      if (hash !== this.lastHash)
        log.warn('cannot read the TLS certificate files; keeping the current certificate', {
          ...files,
          err: message(e),
        });
      this.lastHash = hash;
      return false;
    }
    const hash = contentHash(pair.cert, pair.key);
    if (hash === this.lastHash || this.stopped) return false;
    this.lastHash = hash;
    if (hash === this.currentHash) return false;
    const check = parseBundle(pair, this.clock.now());
    if (!check.ok) {
      log.warn('the TLS certificate files changed to an unusable pair; keeping the current certificate', {
        ...files,
        reason: check.reason,
      });
      return false;
    }
    this.currentPair = { ...pair, notBefore: check.notBefore, notAfter: check.notAfter, dnsNames: check.dnsNames };
    this.currentHash = hash;
    log.info('TLS certificate files changed; swapping in the new certificate', {
      ...files,
      notAfter: new Date(check.notAfter).toISOString(),
    });
    try {
      this.onChange(this.currentPair);
    } catch (e) {
      log.error('TLS certificate listener failed', { err: message(e) });
    }
    return true;
  }
}

/** `run` one call at a time; a burst of calls while one runs shares the next. */
function oneAtATime(run: () => Promise<boolean>): () => Promise<boolean> {
  let chain: Promise<unknown> = Promise.resolve();
  let queued: Promise<boolean> | undefined;
  return () => {
    if (queued) return queued;
    const next = chain.then(() => {
      queued = undefined;
      return run();
    });
    queued = next;
    chain = next.catch(() => undefined);
    return next;
  };
}

/**
 * fs.watch on each distinct directory, calling onEvent on any change there.
 * Only a speed-up over polling: a directory that cannot be watched, or whose
 * watch fails later, is left to the poll.
 */
function watchDirectories(dirs: readonly string[], onEvent: () => void, log: Logger): FSWatcher[] {
  const watchers: FSWatcher[] = [];
  for (const dir of new Set(dirs)) {
    try {
      const watcher = watch(dir, { persistent: false }, onEvent);
      watcher.on('error', (e) => {
        log.debug('watching TLS certificate directory failed; relying on polling', { dir, err: message(e) });
        watcher.close();
      });
      watchers.push(watcher);
    } catch (e) {
      log.debug('cannot watch TLS certificate directory; relying on polling', { dir, err: message(e) });
    }
  }
  return watchers;
}
