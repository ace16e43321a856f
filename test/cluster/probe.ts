// Readiness probes and waiting with deadlines for the local control plane.
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';

export interface TlsClient {
  ca?: string;
  cert?: string;
  key?: string;
}

/** GET a URL; resolves to the status code, or undefined when unreachable. */
export async function httpStatus(url: string, tls: TlsClient = {}, timeoutMs = 2000): Promise<number | undefined> {
  const parsed = new URL(url);
  return new Promise((resolve) => {
    const options = {
      host: parsed.hostname,
      port: parsed.port,
      path: parsed.pathname + parsed.search,
      method: 'GET',
      timeout: timeoutMs,
      ...(parsed.protocol === 'https:'
        ? { ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: tls.ca !== undefined }
        : {}),
    };
    const req = (parsed.protocol === 'https:' ? request : httpRequest)(options, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

export class DeadlineError extends Error {}

/**
 * Polls `check` until it returns a value other than undefined/false, or the
 * deadline passes. `fail` is consulted on every round so a component that
 * died ends the wait at once with its own message instead of a timeout.
 */
export async function waitFor<T>(
  description: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  options: { timeoutMs: number; intervalMs?: number; fail?: () => string | undefined },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown;
  for (;;) {
    const failure = options.fail?.();
    if (failure) throw new Error(failure);
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const cause = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new DeadlineError(`timed out after ${options.timeoutMs} ms waiting for ${description}${cause}`);
    }
    await delay(options.intervalMs ?? 200);
  }
}
