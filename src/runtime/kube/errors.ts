// One error type for every API failure, whatever went wrong: an HTTP status
// with a Status body, a timeout, a refused connection, a client-side rate
// limit. Callers branch on the helpers, never on message text.

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export class KubeApiError extends Error {
  /** HTTP status; 0 when no response arrived (network failure, timeout, rate limit). */
  readonly code: number;
  /** The Status reason (NotFound, Conflict, Expired, TooManyRequests, …) or a local one (Timeout, NetworkError, RateLimited). */
  readonly reason: string;
  readonly method: string;
  readonly path: string;
  /** Seconds the server asked us to wait (Retry-After or Status details). */
  readonly retryAfterSeconds: number | undefined;
  readonly causes: StatusCause[];

  constructor(init: {
    code: number;
    reason: string;
    message: string;
    method: string;
    path: string;
    retryAfterSeconds?: number;
    causes?: StatusCause[];
    cause?: unknown;
  }) {
    super(
      `${init.method} ${init.path}: ${init.code ? `${init.code} ` : ''}${init.reason}: ${init.message}`,
      init.cause === undefined ? undefined : { cause: init.cause },
    );
    this.name = 'KubeApiError';
    this.code = init.code;
    this.reason = init.reason;
    this.method = init.method;
    this.path = init.path;
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.causes = init.causes ?? [];
  }

  /** The server's own message (without method and path). */
  get statusMessage(): string {
    return this.message.slice(this.message.indexOf(`${this.reason}: `) + this.reason.length + 2);
  }
}

function asApiError(error: unknown): KubeApiError | undefined {
  return error instanceof KubeApiError ? error : undefined;
}

export const isNotFound = (e: unknown) => asApiError(e)?.code === 404;
export const isConflict = (e: unknown) => asApiError(e)?.code === 409 && asApiError(e)?.reason !== 'AlreadyExists';
export const isAlreadyExists = (e: unknown) => asApiError(e)?.reason === 'AlreadyExists';
/** 410 Gone: a resourceVersion too old to watch or list from; relist. */
export const isGone = (e: unknown) => asApiError(e)?.code === 410 || asApiError(e)?.reason === 'Expired';
export const isForbidden = (e: unknown) => asApiError(e)?.code === 403;
export const isInvalid = (e: unknown) => asApiError(e)?.code === 422;
/**
 * A failure a retry can mend: no answer (connection dropped, timeout, the
 * client's own rate limit), 429, or a 5xx; anything not from the API client
 * counts too. A 4xx refusal does not: the same request gets the same answer.
 */
export const isRetryable = (e: unknown) => {
  const error = asApiError(e);
  return error === undefined || error.code === 0 || error.code === 429 || error.code >= 500;
};

const reasonByCode: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** Builds the error for a non-2xx answer from its body (a Status, usually). */
export function errorFromResponse(
  method: string,
  path: string,
  code: number,
  body: string,
  retryAfterHeader: string | null,
): KubeApiError {
  let status: { reason?: string; message?: string; details?: { causes?: StatusCause[]; retryAfterSeconds?: number } } =
    {};
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object') status = parsed;
  } catch {
    // Not JSON (a proxy's HTML page, say): keep the start of the text as the message.
  }
  const headerSeconds =
    retryAfterHeader !== null && /^\d+$/.test(retryAfterHeader.trim()) ? Number(retryAfterHeader) : undefined;
  return new KubeApiError({
    code,
    reason: status.reason || reasonByCode[code] || `HTTP${code}`,
    message: status.message || body.slice(0, 300) || `HTTP ${code}`,
    method,
    path,
    retryAfterSeconds: headerSeconds ?? status.details?.retryAfterSeconds,
    causes: status.details?.causes ?? [],
  });
}
