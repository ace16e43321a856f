// The AdmissionReview serving layer shared by every webhook, independent of
// the HTTP transport: the server hands over the Content-Type header and the
// (already size-limited) body, and sends back whatever status, content type
// and body this returns.
//
// Behaviour follows rollout-operator's pkg/admission/serve.go:
// - Content-Type must be exactly "application/json": the whole header is
//   compared, so "application/json; charset=utf-8" is refused too. The API
//   server always sends the bare value; being as strict as rollout-operator keeps
//   Stateward a drop-in replacement (same 400 for the same request).
// - Errors before the handler runs are HTTP 400 (413 for an oversized body)
//   with a text/plain message, as Go's http.Error writes them (message + "\n").
// - admission.k8s.io/v1 and v1beta1 AdmissionReview are accepted; their
//   request/response shapes are the same for every field we use, so v1beta1
//   needs no conversion, and the response keeps the request's apiVersion/kind.
// - Whether a webhook fails open or closed is the handler's decision. A
//   handler that throws (a bug) or outlives the request's deadline gets HTTP
//   500, so the API server applies the webhook's failurePolicy.
import type { Readable } from 'node:stream';
import { nopLogger, type Logger } from '../log/logger.ts';
import type { Span } from '../tracing/tracing.ts';

/**
 * Largest AdmissionReview body accepted. The API server accepts request bodies
 * up to 3 MiB, and an UPDATE review carries both the new object (up to that
 * size) and the old one (likewise), plus the envelope. A 3 MiB cap could thus
 * refuse a legitimate review of a large StatefulSet, and with failurePolicy
 * Fail that refusal would block the update; 7 MiB covers 2 × 3 MiB + 1 MiB of
 * envelope while still bounding memory per request.
 */
export const MAX_ADMISSION_BODY_BYTES = 7 * 1024 * 1024;

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

export interface AdmissionRequestV1 {
  uid: string;
  kind?: GroupVersionKind;
  resource: GroupVersionResource;
  subResource?: string;
  requestKind?: GroupVersionKind;
  requestResource?: GroupVersionResource;
  requestSubResource?: string;
  name?: string;
  namespace?: string;
  operation: string;
  userInfo?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
  options?: unknown;
}

export interface AdmissionStatus {
  code?: number;
  message?: string;
  reason?: string;
}

export interface AdmissionResponseV1 {
  uid: string;
  allowed: boolean;
  status?: AdmissionStatus;
  warnings?: string[];
  patchType?: 'JSONPatch';
  patch?: string;
}

export type AdmissionDecision = Omit<AdmissionResponseV1, 'uid'>;

export type AdmissionHandler = (
  request: AdmissionRequestV1,
  signal: AbortSignal,
) => Promise<AdmissionDecision> | AdmissionDecision;

export interface AdmissionHttpResponse {
  status: number;
  contentType: string;
  body: string;
}

export const ADMISSION_API_VERSIONS: readonly string[] = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'];

const TEXT = 'text/plain; charset=utf-8';
const EMPTY = Buffer.alloc(0);
const JSON_TYPE = 'application/json';

export const HANDLER_DEADLINE_MESSAGE = 'webhook handler deadline exceeded';

/** Longest request.uid accepted (rollout-operator accepts any; the API server sends UUIDs). */
export const MAX_UID_LENGTH = 1024;

/** Thrown by readLimitedBody when the body is longer than the limit. */
export class BodyTooLargeError extends Error {
  readonly limit: number;
  /** Bytes received when reading stopped (more than limit). */
  readonly received: number;

  constructor(limit: number, received: number) {
    super(`request body exceeds ${limit} bytes`);
    this.name = 'BodyTooLargeError';
    this.limit = limit;
    this.received = received;
  }
}

/** Thrown by readLimitedBody when no byte of the body arrived for its stall timeout. */
export class BodyStalledError extends Error {
  constructor(stallMs: number) {
    super(`no byte of the request body arrived for ${stallMs} ms`);
    this.name = 'BodyStalledError';
  }
}

/**
 * Bodies declared up to this size are copied into one buffer of their
 * declared size as they arrive; larger ones are gathered in the chunks that
 * arrived, so that memory follows the bytes received, not what a client
 * declares and never sends.
 */
const PREALLOCATED_BODY_BYTES = 64 * 1024;

/** Thrown by readLimitedBody when the server's shared byte budget has no room for more of the body. */
export class BodyBudgetExhaustedError extends Error {
  constructor() {
    super('the server is holding as many request bytes as it may; retry');
    this.name = 'BodyBudgetExhaustedError';
  }
}

/**
 * Reads a whole body, refusing one longer than `limit` bytes. On overflow it
 * drops what it holds, detaches and pauses the stream (it does not destroy it,
 * so an HTTP server can still answer 413 — best with `Connection: close`), and
 * rejects with BodyTooLargeError. At most limit + one chunk is ever held.
 * Rejects with the signal's reason on abort, with BodyStalledError when no
 * byte arrived for `stallMs`, and with the stream's error, or an Error if it
 * closes before its end.
 */
export function readLimitedBody(
  stream: Readable,
  limit: number,
  signal: AbortSignal,
  take: (bytes: number) => boolean = () => true,
  expectedLength?: number,
  stallMs?: number,
): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      return;
    }
    // With a known length (Content-Length, which Node's parser enforces) the
    // body is copied into one buffer as it arrives: no second copy at the end.
    let whole =
      expectedLength !== undefined && expectedLength <= Math.min(limit, PREALLOCATED_BODY_BYTES)
        ? Buffer.allocUnsafe(expectedLength)
        : undefined;
    let stall: NodeJS.Timeout | undefined;
    const watchStall = () => {
      if (stallMs === undefined) return;
      clearTimeout(stall);
      stall = setTimeout(() => fail(new BodyStalledError(stallMs)), stallMs);
    };
    let chunks: Buffer[] = [];
    let received = 0;
    const detach = () => {
      clearTimeout(stall);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
      signal.removeEventListener('abort', onAbort);
    };
    const fail = (error: unknown) => {
      detach();
      chunks = [];
      whole = undefined;
      stream.pause();
      reject(error instanceof Error ? error : new Error(String(error)));
    };
    const onData = (chunk: Buffer | string) => {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      received += buffer.length;
      if (received > limit) {
        fail(new BodyTooLargeError(limit, received));
        return;
      }
      if (!take(buffer.length)) {
        fail(new BodyBudgetExhaustedError());
        return;
      }
      if (whole && received <= whole.length) buffer.copy(whole, received - buffer.length);
      else chunks.push(buffer);
      watchStall();
    };
    const onEnd = () => {
      detach();
      resolve(whole && received === whole.length ? whole : Buffer.concat(chunks, received));
    };
    const onError = (error: unknown) => fail(error);
    const onClose = () => fail(new Error('request body stream closed before its end'));
    const onAbort = () => fail(signal.reason);
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
    stream.once('close', onClose);
    signal.addEventListener('abort', onAbort, { once: true });
    watchStall();
  });
}

function textResponse(status: number, message: string): AdmissionHttpResponse {
  return { status, contentType: TEXT, body: `${message}\n` };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** apiVersion as Go prints a GroupVersion inside a GVK: the core group shows as "/v1". */
function goGroupVersion(apiVersion: string): string {
  return apiVersion.includes('/') ? apiVersion : `/${apiVersion}`;
}

const optionalString = (value: unknown) => value === undefined || value === null || typeof value === 'string';

/** Checks the fields the handlers rely on; returns the problem, or undefined when fine. */
function requestProblem(request: Record<string, unknown>): string | undefined {
  if (request.uid === undefined || request.uid === null || request.uid === '')
    return 'AdmissionReview request has no uid';
  if (typeof request.uid !== 'string') return 'Request could not be decoded: request.uid is not a string';
  // A Kubernetes uid is a 36-character UUID; the answer echoes it, so a huge one would cost its size twice more.
  if (request.uid.length > MAX_UID_LENGTH)
    return `Request could not be decoded: request.uid is longer than ${MAX_UID_LENGTH} characters`;
  for (const field of ['name', 'namespace', 'operation', 'subResource'] as const) {
    if (!optionalString(request[field])) return `Request could not be decoded: request.${field} is not a string`;
  }
  const resource = request.resource;
  if (resource !== undefined && resource !== null) {
    if (!isRecord(resource)) return 'Request could not be decoded: request.resource is not an object';
    for (const field of ['group', 'version', 'resource'] as const) {
      if (!optionalString(resource[field]))
        return `Request could not be decoded: request.resource.${field} is not a string`;
    }
  }
  const userInfo = request.userInfo;
  if (userInfo !== undefined && userInfo !== null) {
    if (!isRecord(userInfo)) return 'Request could not be decoded: request.userInfo is not an object';
    if (!optionalString(userInfo.username))
      return 'Request could not be decoded: request.userInfo.username is not a string';
  }
  if (request.dryRun !== undefined && request.dryRun !== null && typeof request.dryRun !== 'boolean') {
    return 'Request could not be decoded: request.dryRun is not a boolean';
  }
  return undefined;
}

/** Fills in what Go's decoder would leave as zero values, so handlers can rely on the declared type. */
function normalise(request: Record<string, unknown>): AdmissionRequestV1 {
  const resource = isRecord(request.resource) ? request.resource : {};
  const str = (value: unknown) => (typeof value === 'string' ? value : '');
  const normalised = { ...request } as unknown as AdmissionRequestV1;
  normalised.resource = {
    ...resource,
    group: str(resource.group),
    version: str(resource.version),
    resource: str(resource.resource),
  };
  normalised.operation = str(request.operation);
  for (const field of ['name', 'namespace', 'subResource', 'userInfo', 'dryRun'] as const) {
    if (request[field] === null) delete normalised[field];
  }
  return normalised;
}

type Settled = { ok: true; value: AdmissionDecision } | { ok: false; error: unknown } | { ok: false; deadline: true };

/** Runs the handler, giving up (without waiting) as soon as the signal aborts. */
function runHandler(handler: AdmissionHandler, request: AdmissionRequestV1, signal: AbortSignal): Promise<Settled> {
  if (signal.aborted) return Promise.resolve({ ok: false, deadline: true });
  return new Promise<Settled>((resolve) => {
    const onAbort = () => resolve({ ok: false, deadline: true });
    signal.addEventListener('abort', onAbort, { once: true });
    const settle = (result: Settled) => {
      signal.removeEventListener('abort', onAbort);
      resolve(result);
    };
    try {
      Promise.resolve(handler(request, signal)).then(
        (value) => settle({ ok: true, value }),
        (error: unknown) => settle({ ok: false, error }),
      );
    } catch (error) {
      settle({ ok: false, error });
    }
  });
}

/**
 * Serves one AdmissionReview. Never throws: every outcome is an HTTP answer.
 * `input.body` should already be limited by readLimitedBody; it is checked
 * against MAX_ADMISSION_BODY_BYTES again here, and replaced by an empty
 * buffer once decoded (the caller should hold no other reference to it).
 */
export async function serveAdmission(
  input: { contentType: string | undefined; body: Buffer; signal: AbortSignal; span?: Span | undefined },
  handler: AdmissionHandler,
  log: Logger = nopLogger,
): Promise<AdmissionHttpResponse> {
  const decoded = decodeReview(input, log);
  if (!decoded.ok) return decoded.response;
  const { request } = decoded;
  const fields = requestFields(request);

  // rollout-operator's span tags for the object under review.
  input.span?.setAttributes({
    'object.name': fields.name,
    'object.resource': fields.resource,
    'object.namespace': fields.namespace,
    'request.uid': fields.uid,
    'request.operation': fields.operation,
    'request.dry_run': request.dryRun === true,
  });
  const settled = await runHandler(handler, request, input.signal);
  const answered = handlerDecision(settled, fields, log);
  if (!answered.ok) return answered.response;
  return respond(decoded, answered.decision, fields, input.span, log);
}

/** Either what was asked for, or the HTTP answer refusing the request. */
type Refusable<T> = ({ ok: true } & T) | { ok: false; response: AdmissionHttpResponse };

interface DecodedReview {
  apiVersion: string;
  kind: string;
  request: AdmissionRequestV1;
}

/** The review's envelope and checked request, or the 4xx answer (Go's http.Error) refusing the body. */
function decodeReview(input: { contentType: string | undefined; body: Buffer }, log: Logger): Refusable<DecodedReview> {
  const refuse = (status: number, message: string) => ({ ok: false, response: textResponse(status, message) }) as const;
  if (input.body.length > MAX_ADMISSION_BODY_BYTES) {
    log.warn('admission request body too large', { bytes: input.body.length, limit: MAX_ADMISSION_BODY_BYTES });
    return refuse(413, `request body too large: ${input.body.length} bytes, limit ${MAX_ADMISSION_BODY_BYTES}`);
  }
  if (input.contentType !== JSON_TYPE) {
    log.warn('wrong content type', { contentType: input.contentType ?? '', expected: JSON_TYPE });
    return refuse(400, 'wrong content type');
  }

  let review: unknown;
  try {
    const text = input.body.toString('utf8');
    // The raw bytes are not needed once decoded: dropped here so that they are
    // not kept (up to 7 MiB a request) for as long as the handler runs.
    input.body = EMPTY;
    review = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    log.warn('request could not be decoded', { err: reason });
    return refuse(400, `Request could not be decoded: ${reason}`);
  }
  if (!isRecord(review)) {
    log.warn('request could not be decoded', { err: 'not a JSON object' });
    return refuse(400, 'Request could not be decoded: body is not a JSON object');
  }
  return readReview(review, log);
}

/** The checks on a review's content: its group, version and kind, then its request. */
function readReview(review: Record<string, unknown>, log: Logger): Refusable<DecodedReview> {
  const refuse = (message: string) => ({ ok: false, response: textResponse(400, message) }) as const;
  const { apiVersion, kind } = review;
  if (typeof kind !== 'string' || kind === '') return refuse("Request could not be decoded: Object 'Kind' is missing");
  if (typeof apiVersion !== 'string' || apiVersion === '')
    return refuse("Request could not be decoded: Object 'apiVersion' is missing");
  if (kind !== 'AdmissionReview' || !ADMISSION_API_VERSIONS.includes(apiVersion)) {
    log.warn('unsupported group version kind', { apiVersion, kind });
    return refuse(`Unsupported group version kind: ${goGroupVersion(apiVersion)}, Kind=${kind}`);
  }
  if (!isRecord(review.request)) {
    const message =
      review.request === undefined || review.request === null
        ? 'AdmissionReview has no request'
        : 'Request could not be decoded: request is not an object';
    log.warn('bad admission review', { err: message });
    return refuse(message);
  }
  const problem = requestProblem(review.request);
  if (problem !== undefined) {
    log.warn('bad admission review', { err: problem });
    return refuse(problem);
  }
  return { ok: true, apiVersion, kind, request: normalise(review.request) };
}

/** What every log line about a request carries (a type, not an interface, so it is a logger's Fields). */
type RequestFields = {
  uid: string;
  username: string;
  resource: string;
  name: string;
  namespace: string;
  operation: string;
};

function requestFields(request: AdmissionRequestV1): RequestFields {
  return {
    uid: request.uid,
    username: request.userInfo?.username ?? '',
    resource: request.subResource ? `${request.resource.resource}/${request.subResource}` : request.resource.resource,
    name: request.name ?? '',
    namespace: request.namespace ?? '',
    operation: request.operation,
  };
}

/** The handler's decision, or the 500 answer when it failed, timed out or returned none. */
function handlerDecision(
  settled: Settled,
  fields: RequestFields,
  log: Logger,
): Refusable<{ decision: AdmissionDecision }> {
  const refuse = (message: string) => ({ ok: false, response: textResponse(500, message) }) as const;
  if (!settled.ok) {
    if ('deadline' in settled) {
      log.error('admission handler did not answer before the deadline', fields);
      return refuse(HANDLER_DEADLINE_MESSAGE);
    }
    log.error('admission handler failed', { ...fields, err: settled.error });
    const reason = settled.error instanceof Error ? settled.error.message : String(settled.error);
    return refuse(`webhook handler failed: ${reason}`);
  }
  const decision = settled.value;
  if (!isRecord(decision) || typeof decision.allowed !== 'boolean') {
    log.error('admission handler returned no decision', fields);
    return refuse('webhook handler returned no decision');
  }
  return { ok: true, decision };
}

/** The AdmissionReview answer carrying the decision, or a 500 if it cannot be marshalled. */
function respond(
  { apiVersion, kind, request }: DecodedReview,
  decision: AdmissionDecision,
  fields: RequestFields,
  span: Span | undefined,
  log: Logger,
): AdmissionHttpResponse {
  let body: string;
  try {
    const response: AdmissionResponseV1 = { uid: request.uid, ...decision };
    response.uid = request.uid; // a stray uid from the handler never wins
    body = JSON.stringify({ apiVersion, kind, response });
  } catch (error) {
    log.error('error marshaling response', { ...fields, err: error });
    return textResponse(500, `error marshaling response: ${error instanceof Error ? error.message : String(error)}`);
  }
  span?.setAttributes({
    'admission.decision': decision.allowed ? 'allowed' : 'denied',
    'admission.reason': decision.status?.reason,
    'admission.message': decision.status?.message,
    'admission.code': decision.status?.code,
  });
  log.debug('admission request handled', {
    ...fields,
    decision: decision.allowed ? 'allowed' : 'denied',
    ...(decision.status?.message ? { message: decision.status.message } : {}),
    ...(decision.warnings?.length ? { warnings: decision.warnings } : {}),
  });
  return { status: 200, contentType: JSON_TYPE, body };
}
