// The seeded generator of raw HTTP/1.x requests for the raw-socket fuzzer of
// the operator's two servers (test/fuzz/http-driver.ts drives it): the plain
// HTTP server (/healthz, /ready, /metrics, /status/...) and the HTTPS
// admission webhook server (/admission/...).
//
// It covers the whole input space, not only what a client library would send:
// - random bytes and "token soup" (request-ish tokens in random order);
// - structured requests: every method token (known, lowercase, invalid,
//   over-long, binary), targets in origin, absolute, authority, asterisk and
//   empty forms, `//`, bad ports, bad IPv6 literals, percent-encoding errors,
//   raw high bytes, over-long targets; versions valid and not; header blocks
//   with duplicates, missing colons, obs-fold, NUL/CR/LF inside values, bare
//   LF line ends, huge values and huge header counts;
// - framing: Content-Length short, long (truncated body), invalid, repeated
//   and conflicting; Transfer-Encoding variants; Content-Length together with
//   chunked; chunk-size garbage, missing last chunk, trailers; header blocks
//   cut short;
// - bodies: valid AdmissionReviews for each webhook, mutated ones (support.ts),
//   random bytes, empty, large, over the 7 MiB limit;
// - byte-level mutations of all of the above (bit flips, byte sets, inserted,
//   deleted and duplicated spans, truncation), pipelining (several requests in
//   one write), writes split into pieces with pauses, with or without
//   half-closing our side;
// - for the TLS server, bytes sent without a TLS handshake (plain HTTP,
//   random bytes, truncated handshake records).
//
// Everything is a byte string: strings here are latin1 (one char = one byte).
// A batch is a pure function of (seed, batch index, size): `batchAt`.
import fc from 'fast-check';
import { jsonBytes, mutated, nastyString, textMutationArb } from './support.ts';

export type ServerKind = 'plain' | 'tls';

/** One connection's worth of bytes, and how to send them. */
export interface RawRequest {
  /** What produced it ("structured:chunked-garbage", "random", "mutated:dup", …), for counts and reports. */
  kind: string;
  /** Written in order, one write each, `pauseMs` apart. */
  pieces: Buffer[];
  pauseMs: number;
  /** Half-close our side after the last piece (FIN; close_notify too over TLS), or keep it open. */
  end: boolean;
  /** TLS server only: send the bytes over plain TCP, without a TLS handshake. */
  noHandshake?: boolean;
  /** TLS server only: the handshake's variations (TLS 1.2 with renegotiations first, ALPN offers). */
  tls?: TlsVariant;
}

export interface TlsVariant {
  maxVersion?: 'TLSv1.2';
  /** Renegotiations before the request is written (TLS 1.2 only; Node allows 3 per 10 minutes). */
  renegotiate?: number;
  alpn?: string[];
}

export interface FuzzCase {
  server: ServerKind;
  request: RawRequest;
}

/** The paths each server routes (plus whatever the generator invents around them). */
export interface Routes {
  plain: string[];
  tls: string[];
  /** A namespace the operator watches, for /status/<ns> and review bodies. */
  namespace: string;
}

export const ADMISSION_PATHS = [
  '/admission/no-downscale',
  '/admission/prepare-downscale',
  '/admission/pod-eviction',
  '/admission/zpdb-validation',
  '/admission/rollout-health-check-validation',
  '/admission/reschedule-on-eviction',
];

export function routesFor(namespace: string): Routes {
  return {
    plain: [
      '/healthz',
      '/ready',
      '/metrics',
      '/status',
      `/status/${namespace}`,
      `/status/api/${namespace}`,
      `/status/events/${namespace}`,
      '/status/assets/app.js',
      '/status/assets/markup.js',
      '/status/assets/app.css',
      '/status/assets/icon.svg',
      '/status/api/kube-system',
      '/',
    ],
    tls: ADMISSION_PATHS,
    namespace,
  };
}

// ------------------------------------------------------------ bytes

const latin1 = (s: string): Buffer => Buffer.from(s, 'latin1');
/** A unicode string as the byte string of its UTF-8 encoding. */
const utf8 = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');

/**
 * `bytes` as a JavaScript expression that evaluates to the same latin1 string
 * (Buffer.from(expr, 'latin1') gives the bytes back): escapes for every
 * non-printable byte, long runs of one byte as `.repeat(n)`. Over `max`
 * characters, the middle is elided (the case is regenerable from its seed).
 */
export function escapeBytes(bytes: Buffer, max = 3_000): string {
  const parts: string[] = [];
  let literal = '';
  const flush = () => {
    if (literal) parts.push(`'${literal}'`);
    literal = '';
  };
  const esc = (b: number): string => {
    if (b === 0x5c) return '\\\\';
    if (b === 0x27) return "\\'";
    if (b === 0x0d) return '\\r';
    if (b === 0x0a) return '\\n';
    if (b === 0x09) return '\\t';
    if (b >= 0x20 && b < 0x7f) return String.fromCharCode(b);
    return `\\x${b.toString(16).padStart(2, '0')}`;
  };
  for (let i = 0; i < bytes.length;) {
    let run = 1;
    while (i + run < bytes.length && bytes[i + run] === bytes[i]) run++;
    if (run >= 24) {
      flush();
      parts.push(`'${esc(bytes[i]!)}'.repeat(${run})`);
    } else {
      for (let k = 0; k < run; k++) literal += esc(bytes[i]!);
    }
    i += run;
  }
  flush();
  const text = parts.join(' + ') || "''";
  if (text.length <= max) return text;
  return `${text.slice(0, max / 2)} … [${text.length - max} characters elided; ${bytes.length} bytes in all] … ${text.slice(-max / 2)}`;
}

/** All pieces of a request as one buffer. */
export const requestBytes = (r: RawRequest): Buffer => Buffer.concat(r.pieces);

// ----------------------------------------------------------- tokens

const KNOWN_METHODS = [
  'GET',
  'POST',
  'HEAD',
  'PUT',
  'DELETE',
  'OPTIONS',
  'TRACE',
  'CONNECT',
  'PATCH',
  'PRI',
  'PROPFIND',
  'PROPPATCH',
  'MKCOL',
  'COPY',
  'MOVE',
  'LOCK',
  'UNLOCK',
  'SEARCH',
  'M-SEARCH',
  'NOTIFY',
  'SUBSCRIBE',
  'UNSUBSCRIBE',
  'PURGE',
  'LINK',
  'UNLINK',
  'REPORT',
  'MKACTIVITY',
  'CHECKOUT',
  'MERGE',
  'ACL',
  'BIND',
  'REBIND',
  'UNBIND',
  'MKCALENDAR',
  'QUERY',
  'SOURCE',
  'DESCRIBE',
  'ANNOUNCE',
  'SETUP',
  'PLAY',
  'PAUSE',
  'TEARDOWN',
  'GET_PARAMETER',
  'SET_PARAMETER',
  'REDIRECT',
  'RECORD',
  'FLUSH',
];
const INVALID_METHODS = [
  '',
  'get',
  'post',
  'Get',
  'GETT',
  'GE',
  'G ET',
  'GET\t',
  'GET\x00',
  '\x00',
  'POST\r',
  'P\nOST',
  'ÄGET',
  utf8('ПОСТ'),
  '🙂',
  '*',
  '/',
  'HTTP/1.1',
  '1',
  '-',
  'X'.repeat(100),
  'X'.repeat(20_000),
  'GET GET',
  ' GET',
  'POST ',
  '\x7f',
  '\xff\xfe',
  '(',
  '{"a":1}',
];

const methodArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom('GET', 'POST', 'HEAD') },
  { weight: 5, arbitrary: fc.constantFrom(...KNOWN_METHODS) },
  { weight: 3, arbitrary: fc.constantFrom(...INVALID_METHODS) },
  {
    weight: 1,
    arbitrary: fc.string({
      unit: fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZ-_!#$%&'*+.^`|~0123456789"),
      minLength: 1,
      maxLength: 12,
    }),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }).map(utf8) },
);

const VERSIONS_ODD = [
  '',
  'HTTP/1.0',
  'HTTP/2.0',
  'HTTP/2',
  'HTTP/0.9',
  'HTTP/1.2',
  'HTTP/1.10',
  'HTTP/11',
  'HTTP/1',
  'HTTP/',
  'HTTP',
  'http/1.1',
  'HTTP/1.1 ',
  ' HTTP/1.1',
  'HTTP/1.1x',
  'HTTP/a.b',
  'HTTP/9.9',
  'HTTP/1.1\x00',
  'HTTP/1.1 HTTP/1.1',
  'HTTPS/1.1',
  'RTSP/1.0',
  'ICE/1.0',
  'HTTP/-1.1',
  'HTTP/1.1'.repeat(50),
];

const eolArb = fc.oneof(
  { weight: 16, arbitrary: fc.constant('\r\n') },
  { weight: 1, arbitrary: fc.constantFrom('\n', '\r', '\n\r', '\r\r\n', ' \r\n', '\r\n ') },
);

// ----------------------------------------------------------- targets

/** The request targets of issue 16 that killed the process (kept among the generated ones). */
export const CRASH_TARGETS = ['//', 'http://a:99999/metrics', 'http://[::1/admission/no-downscale'];

const AUTHORITIES = [
  '127.0.0.1',
  'localhost',
  'localhost:8443',
  'a:99999',
  'a:65536',
  'a:-1',
  'a:0',
  'a:abc',
  'a:',
  ':',
  ':80',
  'a:80:80',
  '[::1]',
  '[::1',
  '::1]',
  '[::1]:99999',
  '[::1]:',
  '[zzz]',
  '[::ffff:1.2.3.4]',
  '[fe80::1%25eth0]',
  '[fe80::1%eth0]',
  '[v1.x]',
  '[]',
  '[',
  ']',
  'user:pass@a',
  'user@',
  '@',
  '@@a',
  '%zz',
  '%',
  'a%20b',
  'a b',
  '',
  '300.300.300.300',
  '1.2.3',
  '0x7f.1',
  '4294967296',
  'xn--',
  'xn--zz',
  utf8('ünï.côdé'),
  'a'.repeat(300),
  'a.'.repeat(200),
  '..',
  '.',
  'a\\b',
  'a\x00b',
  'a\tb',
  'a?b',
  'a#b',
  'A:99999999999999999999',
];
const SCHEMES = [
  'http',
  'https',
  'HTTP',
  'hTtP',
  'ftp',
  'file',
  'ws',
  'wss',
  'x',
  'javascript',
  '',
  '1http',
  'h ttp',
  'http+unix',
];

const ODD_TARGETS = [
  ...CRASH_TARGETS,
  '',
  ' ',
  '*',
  '**',
  '/*',
  '//',
  '///',
  '////',
  '//a',
  '//a/b',
  '//a:99999/b',
  '//[::1',
  '//%zz/',
  '///admission/no-downscale',
  '//admission/no-downscale',
  '\\',
  '\\\\',
  '/\\',
  '\\/a',
  '.',
  '..',
  '/..',
  '/../..',
  '/./',
  '/%',
  '/%%',
  '/%z',
  '/%zz',
  '/%f',
  '/%ff%fe',
  '/%00',
  '/%2e%2e/',
  '/%2F',
  '/%c0%af',
  '/%ed%a0%80',
  '/%u0041',
  '?',
  '#',
  '/?',
  '/#',
  '/?%zz',
  '/?a=%',
  '/healthz?',
  '/healthz#',
  '/healthz?x=%zz#%zz',
  '/healthz/',
  '/HEALTHZ',
  '/healthz%00',
  '/healthz;x=y',
  '/status/%zz',
  '/status/%00',
  '/status/%2F',
  '/status/api/%zz',
  '/status/events/%',
  '/status/assets/..%2F..%2Fpackage.json',
  '/status/assets/%2e%2e',
  '/admission/no-downscale/',
  '/admission/no-downscale?dryRun=true',
  '/admission/no-downscale%2F',
  '/admission/%6eo-downscale',
  '/ADMISSION/NO-DOWNSCALE',
  '/admission//no-downscale',
  '/admission/no-downscale#frag',
  '/admission/no-downscale/..',
  '/admission',
  '/admission/',
  'http:',
  'http:/',
  'http://',
  'http:///',
  'http://a',
  'http://a?',
  'http:/healthz',
  'http:healthz',
  'https://localhost/admission/no-downscale',
  'a:b',
  'a:',
  ':',
  ':/',
  'javascript:alert(1)',
  'data:text/plain,x',
  'file:///etc/passwd',
  'mailto:x@y',
  'urn:x:y',
  'localhost:8443',
  'localhost:99999',
  '127.0.0.1:0',
  '[::1]:443',
  '[::1',
  'a',
  'healthz',
  'admission/no-downscale',
  'http://user:pass@localhost/metrics',
  'http://%zz/',
  'http://a b/',
  'http://[::1]:99999/metrics',
  'http://[zzz]/healthz',
  'http://0x7f.1/healthz',
  'http://a:/healthz',
  'http://a:65535/healthz',
  'http://a:65536/healthz',
  'http://a:-1/healthz',
  'http://a:1e3/healthz',
  '/\x00',
  '/\x7f',
  '/\xff',
  '/\x80\x80',
  '/\xc0\xaf',
  '/\xed\xa0\x80',
  utf8('/ümlaut'),
  utf8('/😀'),
  '/\t',
  '/ ',
  '/a b',
  '/a\rb',
  '/a\nb',
  '/\r\n',
  '/"',
  '/<script>',
  "/'",
];

function targetArb(paths: string[]): fc.Arbitrary<string> {
  const path = fc.constantFrom(...paths);
  const suffix = fc.oneof(
    { weight: 6, arbitrary: fc.constant('') },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '?',
        '?a=b',
        '?%zz',
        '?x=%',
        '#f',
        '/',
        '//',
        '/..',
        '%',
        '%zz',
        '%00',
        ';x',
        '?' + 'a'.repeat(9_000),
        '/' + 'x'.repeat(70_000),
      ),
    },
    { weight: 1, arbitrary: nastyString.map((s) => utf8(s)) },
  );
  const absolute = fc
    .tuple(
      fc.constantFrom(...SCHEMES),
      fc.constantFrom('://', ':', ':/', ':///', '//'),
      fc.constantFrom(...AUTHORITIES),
      path,
    )
    .map(([s, sep, a, p]) => `${s}${sep}${a}${p}`);
  const longPath = fc
    .tuple(
      path,
      fc.constantFrom(1_000, 8_000, 15_000, 17_000, 80_000),
      fc.constantFrom('a', '/', '%', '%2F', '../', '\xff'),
    )
    .map(([p, n, unit]) => p + unit.repeat(Math.ceil(n / unit.length)));
  return fc.oneof(
    { weight: 12, arbitrary: fc.tuple(path, suffix).map(([p, s]) => p + s) },
    { weight: 4, arbitrary: fc.constantFrom(...ODD_TARGETS) },
    { weight: 3, arbitrary: absolute },
    { weight: 1, arbitrary: fc.constantFrom(...AUTHORITIES) },
    { weight: 1, arbitrary: longPath },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map((s) => '/' + utf8(s)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b).toString('latin1')) },
  );
}

// ----------------------------------------------------------- headers

type Header = [name: string, value: string];

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'APPLICATION/JSON',
  'application/json ',
  ' application/json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  '',
  ';',
  'application/json\x00',
  utf8('application/jsön'),
  'a'.repeat(10_000),
];

const NASTY_HEADERS: Header[] = [
  ['Connection', 'close'],
  ['Connection', 'keep-alive'],
  ['Connection', 'upgrade'],
  ['Connection', 'keep-alive, upgrade'],
  ['Connection', 'Upgrade, HTTP2-Settings'],
  ['Connection', 'x, y, z, close'],
  ['Connection', ''],
  ['Upgrade', 'websocket'],
  ['Upgrade', 'h2c'],
  ['Upgrade', 'HTTP/2.0'],
  ['HTTP2-Settings', 'AAMAAABkAAQAAP__'],
  ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='],
  ['Sec-WebSocket-Version', '13'],
  ['Expect', '100-continue'],
  ['Expect', '100-Continue'],
  ['Expect', 'garbage'],
  ['Expect', ''],
  ['Host', ''],
  ['Host', 'a:99999'],
  ['Host', '[::1'],
  ['Host', 'a b'],
  ['Host', '%zz'],
  ['Host', 'localhost'],
  ['Host', 'a'.repeat(5_000)],
  ['Content-Encoding', 'gzip'],
  ['Content-Encoding', 'br, gzip'],
  ['Accept-Encoding', 'gzip'],
  ['Accept', 'text/event-stream'],
  ['Range', 'bytes=0-1'],
  ['Range', 'bytes=9999999999-'],
  ['Cookie', 'a=b; ' + 'c=d; '.repeat(100)],
  ['Authorization', 'Bearer ' + 'x'.repeat(100)],
  ['Authorization', 'Basic %%%'],
  ['X-Forwarded-For', '1.2.3.4, ::1, garbage'],
  ['X-Cluster', 'x'],
  ['Keep-Alive', 'timeout=0'],
  ['Keep-Alive', 'timeout=-1, max=99999999999'],
  ['Proxy-Connection', 'keep-alive'],
  ['TE', 'trailers'],
  ['Trailer', 'Content-Length'],
  ['Content-Type', 'application/json'],
  ['Content-Type', 'text/plain'],
  ['Content-Length', ''],
  ['X-a', 'b\x00c'],
  ['X-a', 'b\rc'],
  ['X-a', 'b\nc'],
  ['X-a', '\x7f'],
  ['X-a', '\xff\xfe'],
  ['X-a', utf8('ünïcode 😀')],
  ['X-a', ' '],
  ['X-a', '\t'],
  ['X-a', ''],
  ['X a', 'b'],
  ['X:a', 'b'],
  ['', 'b'],
  ['X-a ', 'b'],
  [' X-a', 'b'],
  ['X\x00a', 'b'],
  ['\xff', 'b'],
  ['(', ')'],
  ['X-a\t', 'b'],
];

/** Extra header lines, raw: whole lines (line end added by the serialiser). */
const RAW_HEADER_LINES = [
  'X-no-colon',
  ':',
  ': empty-name',
  ' folded-continuation',
  '\tfolded-tab',
  'X-a : space-before-colon',
  'X-a:no-space',
  'X-a:  many  spaces  ',
  'X-a:\tb',
  'X-a: b\x00',
  '\x00',
  'GET / HTTP/1.1',
  'HTTP/1.1 200 OK',
  'X-a: ' + 'b'.repeat(20_000),
  'X-a: ' + 'b'.repeat(90_000),
  'Transfer-Encoding:\tchunked',
  'Content-Length:\t5',
  'Content-Length: 5\r\n folded',
  'Transfer-Encoding: chunked\r\n , identity',
];

const headerArb: fc.Arbitrary<Header | string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...NASTY_HEADERS) },
  { weight: 2, arbitrary: fc.constantFrom(...RAW_HEADER_LINES) },
  { weight: 2, arbitrary: fc.tuple(fc.string({ minLength: 1, maxLength: 12 }), nastyString.map(utf8)) },
  {
    weight: 1,
    arbitrary: fc.tuple(
      fc.string({ unit: 'binary', maxLength: 8 }).map(utf8),
      fc.string({ unit: 'binary', maxLength: 20 }).map(utf8),
    ),
  },
);

/** Many headers: counts around the parser's limits (2000 kept, 16 KiB of header block). */
const manyHeadersArb: fc.Arbitrary<(Header | string)[]> = fc
  .tuple(
    fc.constantFrom(100, 1_000, 1_999, 2_001, 2_500, 5_000),
    fc.constantFrom<'same' | 'distinct' | 'host'>('same', 'distinct', 'host'),
  )
  .map(([n, how]) =>
    Array.from({ length: n }, (_, i): Header =>
      how === 'same' ? ['X', 'y'] : how === 'host' ? ['Host', 'a'] : [`x${i}`, ''],
    ),
  );

// ----------------------------------------------------------- bodies

interface ReviewShape {
  uid: string;
  namespace: string;
}

function statefulSet(namespace: string, replicas: number): Record<string, unknown> {
  const labels = { name: 'ingester-zone-a', 'rollout-group': 'ingester', 'grafana.com/no-downscale': 'true' };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'ingester-zone-a', namespace, uid: '6b1a3f0e-2f59-4c0b-9a57-3f1d2c7e8a90', labels },
    spec: {
      replicas,
      serviceName: 'ingester-zone-a',
      selector: { matchLabels: labels },
      template: { metadata: { labels } },
    },
  };
}

/**
 * A valid AdmissionReview for /admission/no-downscale that needs no API call:
 * an upscale (3 → 4, allowed) or a downscale (3 → 2, denied) of a labelled
 * StatefulSet. The fuzzer's health check; `pad` grows it to a size (padding
 * in an annotation of the new object).
 */
export function noDownscaleReview(o: ReviewShape & { downscale?: boolean; pad?: number }): Record<string, unknown> {
  const gvk = { group: 'apps', version: 'v1', kind: 'StatefulSet' };
  const gvr = { group: 'apps', version: 'v1', resource: 'statefulsets' };
  const object = statefulSet(o.namespace, o.downscale ? 2 : 4);
  if (o.pad)
    (object['metadata'] as { annotations?: Record<string, string> }).annotations = { padding: 'x'.repeat(o.pad) };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: o.uid,
      kind: gvk,
      resource: gvr,
      requestKind: gvk,
      requestResource: gvr,
      name: 'ingester-zone-a',
      namespace: o.namespace,
      operation: 'UPDATE',
      userInfo: { username: 'fuzz' },
      object,
      oldObject: statefulSet(o.namespace, 3),
      dryRun: false,
    },
  };
}

/** A no-downscale review of exactly `bytes` bytes of JSON (at least the unpadded size). */
export function noDownscaleReviewOfSize(o: ReviewShape & { downscale?: boolean }, bytes: number): Buffer {
  const bare = Buffer.byteLength(JSON.stringify(noDownscaleReview({ ...o, pad: 1 })));
  return Buffer.from(JSON.stringify(noDownscaleReview({ ...o, pad: Math.max(1, bytes - bare + 1) })));
}

function evictionReview(o: ReviewShape, pod: string): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: o.uid,
      kind: { group: 'policy', version: 'v1', kind: 'Eviction' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      subResource: 'eviction',
      name: pod,
      namespace: o.namespace,
      operation: 'CREATE',
      userInfo: { username: 'fuzz' },
      object: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod, namespace: o.namespace } },
      dryRun: true,
    },
  };
}

function zpdbReview(o: ReviewShape): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: o.uid,
      resource: { group: 'rollout-operator.grafana.com', version: 'v1', resource: 'zoneawarepoddisruptionbudgets' },
      name: 'z',
      namespace: o.namespace,
      operation: 'CREATE',
      userInfo: { username: 'fuzz' },
      object: {
        apiVersion: 'rollout-operator.grafana.com/v1',
        kind: 'ZoneAwarePodDisruptionBudget',
        metadata: { name: 'z', namespace: o.namespace },
        spec: { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } },
      },
    },
  };
}

/** A valid review for `path` (the right kind of object for its webhook), any of them for other paths. */
function reviewArb(path: string, namespace: string): fc.Arbitrary<Record<string, unknown>> {
  const uid = fc.uuid();
  const ns = fc.oneof(
    { weight: 6, arbitrary: fc.constant(namespace) },
    { weight: 1, arbitrary: fc.constantFrom('default', 'kube-system', '', 'no-such-namespace', 'A_B') },
  );
  const noDownscale = fc
    .tuple(uid, ns, fc.boolean())
    .map(([u, n, d]) => noDownscaleReview({ uid: u, namespace: n, downscale: d }));
  const eviction = fc
    .tuple(uid, ns, fc.constantFrom('ingester-zone-a-0', 'web-0', 'missing', ''))
    .map(([u, n, p]) => evictionReview({ uid: u, namespace: n }, p));
  const zpdb = fc.tuple(uid, ns).map(([u, n]) => zpdbReview({ uid: u, namespace: n }));
  if (path.includes('no-downscale') || path.includes('prepare-downscale')) return noDownscale;
  if (path.includes('eviction')) return eviction;
  if (path.includes('zpdb')) return zpdb;
  return fc.oneof(noDownscale, eviction, zpdb);
}

const OVER_LIMIT = 7 * 1024 * 1024 + 1;

function bodyArb(path: string, namespace: string, admission: boolean): fc.Arbitrary<Buffer> {
  const review = reviewArb(path, namespace);
  // Weights in twentieths: the over-limit body (7 MiB + 1 of spaces) is rare.
  return fc.oneof(
    { weight: admission ? 300 : 20, arbitrary: review.map((r) => Buffer.from(JSON.stringify(r))) },
    {
      weight: admission ? 150 : 20,
      arbitrary: fc.tuple(mutated(review), textMutationArb).map(([doc, m]) => jsonBytes(doc, m)),
    },
    { weight: 60, arbitrary: fc.constant(Buffer.alloc(0)) },
    { weight: 40, arbitrary: fc.uint8Array({ maxLength: 2_000 }).map((b) => Buffer.from(b)) },
    {
      weight: 20,
      arbitrary: fc
        .constantFrom(
          '{}',
          '[]',
          'null',
          '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}',
          '{"request":{"uid":"x"}}',
          '0\r\n\r\n',
          'GET / HTTP/1.1\r\n\r\n',
        )
        .map(latin1),
    },
    {
      weight: 20,
      arbitrary: fc
        .tuple(fc.constantFrom(100_000, 1_000_000), fc.constantFrom('x', '[', '{"a":', ' '))
        .map(([n, unit]) => latin1(unit.repeat(Math.ceil(n / unit.length)))),
    },
    { weight: admission ? 4 : 1, arbitrary: fc.constant(OVER_LIMIT).map((n) => Buffer.alloc(n, 0x20)) },
  );
}

// ----------------------------------------------------------- framing

type Framing =
  | { type: 'length' }
  | { type: 'length-short' | 'length-long'; by: number }
  | { type: 'length-invalid'; value: string }
  | { type: 'length-twice'; second: string }
  | { type: 'chunked'; sizes: number[]; trailers: boolean }
  | { type: 'chunked-garbage'; how: string }
  | { type: 'length-and-chunked'; order: 'cl-first' | 'te-first'; length: string }
  | { type: 'te-variant'; value: string; length: boolean }
  | { type: 'none' }
  | { type: 'cut-headers'; at: number };

const INVALID_LENGTHS = [
  '-1',
  'abc',
  '1e3',
  '0x10',
  ' 10',
  '10 ',
  '+10',
  '',
  '99999999999999999999',
  '18446744073709551616',
  '9007199254740993',
  '1,1',
  '10, 20',
  '007',
  '1.0',
  '0',
  '\x00',
  '１０',
  '10\x00',
  '2147483648',
  '-0',
];
const TE_VALUES = [
  'chunked',
  'Chunked',
  'CHUNKED',
  'chunked ',
  ' chunked',
  'chunked, chunked',
  'gzip, chunked',
  'chunked, gzip',
  'gzip',
  'identity',
  'xchunked',
  'chunkedx',
  'chunked;q=1',
  '"chunked"',
  '',
  'chunked\x00',
  'compress, deflate, gzip, chunked',
];
const CHUNK_GARBAGE = [
  'zz',
  '-1',
  'ffffffffffffffffffff',
  '0x10',
  '1;ext=val',
  '1 ;',
  '1\t',
  ' 1',
  '',
  'missing-last',
  'missing-crlf',
  'data-longer',
  'data-shorter',
  'lf-only',
  'bad-trailer',
  'huge-truncated',
  'chunk-ext-long',
  'cr-only',
  '0-then-data',
  'nul-size',
];

const framingArb: fc.Arbitrary<Framing> = fc.oneof(
  { weight: 20, arbitrary: fc.constant({ type: 'length' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constantFrom('length-short' as const, 'length-long' as const),
      by: fc.constantFrom(1, 2, 10, 1000, 1_000_000),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ type: fc.constant('length-invalid' as const), value: fc.constantFrom(...INVALID_LENGTHS) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('length-twice' as const),
      second: fc.constantFrom('same', '0', '1', 'abc', '999999'),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      type: fc.constant('chunked' as const),
      sizes: fc.array(fc.integer({ min: 1, max: 4096 }), { maxLength: 6 }),
      trailers: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ type: fc.constant('chunked-garbage' as const), how: fc.constantFrom(...CHUNK_GARBAGE) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('length-and-chunked' as const),
      order: fc.constantFrom('cl-first' as const, 'te-first' as const),
      length: fc.constantFrom('0', '4', 'exact', '99999'),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('te-variant' as const),
      value: fc.constantFrom(...TE_VALUES),
      length: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ type: 'none' as const }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('cut-headers' as const), at: fc.nat() }) },
);

function chunked(body: Buffer, sizes: number[], eol = '\r\n'): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  let i = 0;
  while (at < body.length) {
    const size = Math.min(body.length - at, sizes.length > 0 ? sizes[i++ % sizes.length]! : body.length);
    out.push(latin1(size.toString(16) + eol), body.subarray(at, at + size), latin1(eol));
    at += size;
  }
  return Buffer.concat(out);
}

function chunkedGarbage(body: Buffer, how: string): Buffer {
  const b = body.length > 0 ? body : latin1('{}');
  const size = b.length.toString(16);
  switch (how) {
    case 'missing-last':
      return Buffer.concat([latin1(`${size}\r\n`), b, latin1('\r\n')]);
    case 'missing-crlf':
      return Buffer.concat([latin1(`${size}\r\n`), b, latin1('0\r\n\r\n')]);
    case 'data-longer':
      return Buffer.concat([latin1(`${Math.max(1, b.length - 1).toString(16)}\r\n`), b, latin1('\r\n0\r\n\r\n')]);
    case 'data-shorter':
      return Buffer.concat([latin1(`${(b.length + 5).toString(16)}\r\n`), b, latin1('\r\n0\r\n\r\n')]);
    case 'lf-only':
      return Buffer.concat([latin1(`${size}\n`), b, latin1('\n0\n\n')]);
    case 'cr-only':
      return Buffer.concat([latin1(`${size}\r`), b, latin1('\r0\r\r')]);
    case 'bad-trailer':
      return Buffer.concat([chunked(b, []), latin1('0\r\nX-no-colon\r\n: x\r\n\x00\r\n\r\n')]);
    case 'huge-truncated':
      return latin1('7fffffff\r\nabc');
    case 'chunk-ext-long':
      return Buffer.concat([latin1(`${size};${'e=v;'.repeat(5_000)}\r\n`), b, latin1('\r\n0\r\n\r\n')]);
    case '0-then-data':
      return Buffer.concat([latin1('0\r\n\r\n'), b]);
    case 'nul-size':
      return Buffer.concat([latin1(`\x00${size}\r\n`), b, latin1('\r\n0\r\n\r\n')]);
    default:
      return Buffer.concat([latin1(`${how}\r\n`), b, latin1('\r\n0\r\n\r\n')]);
  }
}

/** The framing headers and the body bytes as sent. */
function frame(body: Buffer, f: Framing): { headers: Header[]; body: Buffer; cut?: number } {
  const cl = (v: string | number): Header => ['Content-Length', String(v)];
  const te = (v: string): Header => ['Transfer-Encoding', v];
  switch (f.type) {
    case 'length':
      return { headers: [cl(body.length)], body };
    case 'length-short':
      return { headers: [cl(Math.max(0, body.length - f.by))], body };
    case 'length-long':
      return { headers: [cl(body.length + f.by)], body };
    case 'length-invalid':
      return { headers: [cl(f.value)], body };
    case 'length-twice':
      return { headers: [cl(body.length), cl(f.second === 'same' ? body.length : f.second)], body };
    case 'chunked':
      return {
        headers: [te('chunked')],
        body: Buffer.concat([
          chunked(body, f.sizes),
          latin1(f.trailers ? '0\r\nX-Trailer: t\r\nContent-Length: 99\r\n\r\n' : '0\r\n\r\n'),
        ]),
      };
    case 'chunked-garbage':
      return { headers: [te('chunked')], body: chunkedGarbage(body, f.how) };
    case 'length-and-chunked': {
      const enc = Buffer.concat([chunked(body, []), latin1('0\r\n\r\n')]);
      const length = cl(f.length === 'exact' ? enc.length : f.length);
      return { headers: f.order === 'cl-first' ? [length, te('chunked')] : [te('chunked'), length], body: enc };
    }
    case 'te-variant': {
      const enc = Buffer.concat([chunked(body, []), latin1('0\r\n\r\n')]);
      return { headers: f.length ? [te(f.value), cl(body.length)] : [te(f.value)], body: enc };
    }
    case 'none':
      return { headers: [], body };
    case 'cut-headers':
      return { headers: [cl(body.length)], body, cut: f.at };
  }
}

// ----------------------------------------------------------- requests

interface Model {
  method: string;
  target: string;
  version: string;
  eol: string;
  host: boolean;
  contentType: string | undefined;
  extra: (Header | string)[];
  body: Buffer;
  framing: Framing;
}

const FIELDS = ['method', 'target', 'version', 'eol', 'host', 'contentType', 'extra', 'framing'] as const;

/**
 * A request with a few of its parts made odd: none (a good request, which
 * reaches the handlers), mostly one, sometimes two or three, so that each
 * odd part is met by a parser that got past the others.
 */
function modelArb(paths: string[], namespace: string, admission: boolean): fc.Arbitrary<Model> {
  const wild = fc.oneof(
    { weight: 3, arbitrary: fc.constant<(typeof FIELDS)[number][]>([]) },
    { weight: 4, arbitrary: fc.subarray([...FIELDS], { minLength: 1, maxLength: 1 }) },
    { weight: 2, arbitrary: fc.subarray([...FIELDS], { minLength: 2, maxLength: 3 }) },
  );
  return fc.constantFrom(...paths).chain((path) =>
    fc
      .record({
        wild,
        goodMethod: admission
          ? fc.oneof(
              { weight: 8, arbitrary: fc.constant('POST') },
              { weight: 1, arbitrary: fc.constantFrom('GET', 'PUT') },
            )
          : fc.oneof(
              { weight: 8, arbitrary: fc.constant('GET') },
              { weight: 1, arbitrary: fc.constantFrom('HEAD', 'POST') },
            ),
        method: methodArb,
        target: targetArb(paths),
        version: fc.constantFrom(...VERSIONS_ODD),
        eol: eolArb.filter((e) => e !== '\r\n'),
        contentType: fc.oneof(fc.constant(undefined), fc.constantFrom(...CONTENT_TYPES)),
        extra: fc.oneof(
          { weight: 6, arbitrary: fc.array(headerArb, { minLength: 1, maxLength: 4 }) },
          { weight: 1, arbitrary: manyHeadersArb },
        ),
        body: admission
          ? fc.oneof(
              { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
              { weight: 8, arbitrary: bodyArb(path, namespace, admission) },
            )
          : fc.oneof(
              { weight: 4, arbitrary: fc.constant(Buffer.alloc(0)) },
              { weight: 1, arbitrary: bodyArb(path, namespace, admission) },
            ),
        framing: framingArb,
      })
      .map((r): Model => {
        const odd = (f: (typeof FIELDS)[number]) => r.wild.includes(f);
        return {
          method: odd('method') ? r.method : r.goodMethod,
          target: odd('target') ? r.target : path,
          version: odd('version') ? r.version : 'HTTP/1.1',
          eol: odd('eol') ? r.eol : '\r\n',
          host: !odd('host'),
          contentType: odd('contentType') ? r.contentType : admission ? 'application/json' : undefined,
          extra: odd('extra') ? r.extra : [],
          body: r.body,
          framing: odd('framing') ? r.framing : { type: 'length' },
        };
      }),
  );
}

function serialize(m: Model): Buffer {
  const framed = frame(m.body, m.framing);
  const line = (h: Header | string) => (typeof h === 'string' ? h : `${h[0]}: ${h[1]}`) + m.eol;
  let head = `${m.method} ${m.target}${m.version === '' ? '' : ' ' + m.version}${m.eol}`;
  if (m.host) head += line(['Host', 'localhost']);
  if (m.contentType !== undefined) head += line(['Content-Type', m.contentType]);
  // Extra headers and framing interleaved: framing headers are not always last.
  const extra = [...m.extra];
  extra.splice(extra.length > 0 ? m.body.length % (extra.length + 1) : 0, 0, ...framed.headers);
  for (const h of extra) head += line(h);
  head += m.eol;
  const bytes = Buffer.concat([latin1(head), framed.body]);
  if (framed.cut !== undefined) return bytes.subarray(0, framed.cut % Math.max(1, head.length - 1));
  return bytes;
}

function framingName(f: Framing): string {
  return f.type === 'chunked-garbage' ? `chunked-garbage(${f.how})` : f.type;
}

// ------------------------------------------------------ byte mutations

type ByteMutation =
  | { op: 'flip'; at: number; bit: number }
  | { op: 'set'; at: number; byte: number }
  | { op: 'insert'; at: number; text: string }
  | { op: 'delete'; at: number; length: number }
  | { op: 'duplicate'; at: number; length: number; to: number }
  | { op: 'truncate'; at: number }
  // Header-block mutations: on the lines of the head (request line included).
  | {
      op:
        | 'line-dup'
        | 'line-drop'
        | 'line-fold'
        | 'line-upper'
        | 'line-lower'
        | 'line-bare-lf'
        | 'line-space-before-colon'
        | 'line-nul';
      at: number;
      times: number;
    }
  | { op: 'line-swap'; at: number; with: number; times: number };

const INSERTS = [
  '\r\n',
  '\r\n\r\n',
  '\n',
  '\r',
  ' ',
  '\t',
  ':',
  '\x00',
  '%',
  '%zz',
  '//',
  'HTTP/1.1',
  '0\r\n\r\n',
  'Content-Length: 5\r\n',
  'Transfer-Encoding: chunked\r\n',
  'Host: a:99999\r\n',
  'GET // HTTP/1.1\r\n\r\n',
  'POST http://[::1/ HTTP/1.1\r\n\r\n',
  '\xff',
  '\xc0',
  utf8('😀'),
];

const byteMutationArb: fc.Arbitrary<ByteMutation> = fc.oneof(
  fc.record({ op: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({
    op: fc.constant('insert' as const),
    at: fc.nat(),
    text: fc.oneof(
      fc.constantFrom(...INSERTS),
      fc.uint8Array({ minLength: 1, maxLength: 16 }).map((b) => Buffer.from(b).toString('latin1')),
    ),
  }),
  fc.record({ op: fc.constant('delete' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 64 }) }),
  fc.record({
    op: fc.constant('duplicate' as const),
    at: fc.nat(),
    length: fc.integer({ min: 1, max: 256 }),
    to: fc.nat(),
  }),
  fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({
    op: fc.constantFrom(
      'line-dup' as const,
      'line-drop' as const,
      'line-fold' as const,
      'line-upper' as const,
      'line-lower' as const,
      'line-bare-lf' as const,
      'line-space-before-colon' as const,
      'line-nul' as const,
    ),
    at: fc.nat(),
    times: fc.oneof({ weight: 8, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constantFrom(2, 50, 3_000) }),
  }),
  fc.record({ op: fc.constant('line-swap' as const), at: fc.nat(), with: fc.nat(), times: fc.constant(1) }),
);

/** A header-block mutation: the head's lines edited, the rest (body) untouched. */
function mutateLines(b: Buffer, m: Extract<ByteMutation, { times: number }>): Buffer {
  const end = b.indexOf('\r\n\r\n');
  const headEnd = end < 0 ? b.length : end;
  const lines = b.subarray(0, headEnd).toString('latin1').split('\r\n');
  const i = m.at % lines.length;
  const line = lines[i]!;
  switch (m.op) {
    case 'line-dup':
      lines.splice(i, 0, ...Array.from({ length: m.times }, () => line));
      break;
    case 'line-drop':
      lines.splice(i, 1);
      break;
    case 'line-swap': {
      const j = m.with % lines.length;
      lines[i] = lines[j]!;
      lines[j] = line;
      break;
    }
    case 'line-fold':
      lines.splice(i + 1, 0, ...Array.from({ length: m.times }, () => ' folded'));
      break;
    case 'line-upper':
      lines[i] = line.toUpperCase();
      break;
    case 'line-lower':
      lines[i] = line.toLowerCase();
      break;
    case 'line-bare-lf':
      lines[i] = `${line}\n`;
      break;
    case 'line-space-before-colon':
      lines[i] = line.replace(':', ' :');
      break;
    case 'line-nul':
      lines[i] = `${line.slice(0, line.length >> 1)}\x00${line.slice(line.length >> 1)}`;
      break;
  }
  return Buffer.concat([latin1(lines.join('\r\n')), b.subarray(headEnd)]);
}

/** Byte mutations land mostly in the head (request line and headers), where the parsers are. */
function mutateBytes(bytes: Buffer, mutations: readonly ByteMutation[]): Buffer {
  let b: Buffer = Buffer.from(bytes);
  for (const m of mutations) {
    if ('times' in m) {
      b = mutateLines(b, m);
      continue;
    }
    const headEnd = b.indexOf('\r\n\r\n');
    const span = m.at % 2 === 0 && headEnd > 0 ? headEnd + 4 : b.length;
    const at = span === 0 ? 0 : (m.at >>> 1) % (span + 1);
    switch (m.op) {
      case 'flip':
        if (at < b.length) b[at] = b[at]! ^ (1 << m.bit);
        break;
      case 'set':
        if (at < b.length) b[at] = m.byte;
        break;
      case 'insert':
        b = Buffer.concat([b.subarray(0, at), latin1(m.text), b.subarray(at)]);
        break;
      case 'delete':
        b = Buffer.concat([b.subarray(0, at), b.subarray(at + m.length)]);
        break;
      case 'duplicate': {
        const piece = Buffer.from(b.subarray(at, at + m.length));
        const to = m.to % (b.length + 1);
        b = Buffer.concat([b.subarray(0, to), piece, b.subarray(to)]);
        break;
      }
      case 'truncate':
        b = b.subarray(0, at);
        break;
    }
  }
  return b;
}

// ------------------------------------------------------- whole cases

const SOUP = [
  'GET',
  'POST',
  'HEAD',
  ' ',
  ' ',
  '/',
  '//',
  '/healthz',
  '/admission/no-downscale',
  '*',
  'http://',
  '[::1',
  ':99999',
  '%',
  '%zz',
  '?',
  '#',
  'HTTP/1.1',
  'HTTP/1.0',
  '\r\n',
  '\r\n',
  '\r\n\r\n',
  '\n',
  'Host: ',
  'Content-Length: ',
  'Transfer-Encoding: chunked',
  'Content-Type: application/json',
  'Connection: close',
  'Expect: 100-continue',
  ':',
  '0',
  '1',
  '5',
  'ffffffff',
  '-1',
  '{',
  '}',
  '"',
  '\x00',
  '\xff',
  'a',
  'chunked',
  ';',
  ',',
];

const soupArb = fc.array(fc.constantFrom(...SOUP), { minLength: 1, maxLength: 60 }).map((t) => latin1(t.join('')));

/** Bytes that are not a TLS handshake, sent to the TLS port. */
const noHandshakeArb: fc.Arbitrary<Buffer> = fc.oneof(
  fc.constant(latin1('GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n')),
  fc.constant(latin1('POST // HTTP/1.1\r\n\r\n')),
  fc.uint8Array({ maxLength: 600 }).map((b) => Buffer.from(b)),
  // A handshake record header with garbage or a truncated/oversized length.
  fc
    .tuple(
      fc.constantFrom(0x16, 0x15, 0x17, 0x14, 0x80),
      fc.constantFrom(0x00, 0x03),
      fc.constantFrom(0x00, 0x01, 0x03, 0x04),
      fc.integer({ min: 0, max: 0xffff }),
      fc.uint8Array({ maxLength: 300 }),
    )
    .map(([type, major, minor, length, rest]) =>
      Buffer.concat([Buffer.from([type, major, minor, length >> 8, length & 0xff]), Buffer.from(rest)]),
    ),
  fc.constant(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')),
);

const PIPELINE_PARTS = [
  'GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n',
  'GET // HTTP/1.1\r\n\r\n',
  'POST /admission/no-downscale HTTP/1.1\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}',
  'GET http://a:99999/metrics HTTP/1.1\r\n\r\n',
  'HEAD /ready HTTP/1.1\r\n\r\n',
  'garbage\r\n\r\n',
  '\r\n',
  'GET /metrics HTTP/1.0\r\n\r\n',
];

interface Delivery {
  splits: number[];
  pauseMs: number;
  end: boolean;
}

const deliveryArb: fc.Arbitrary<Delivery> = fc.record({
  splits: fc.oneof(
    { weight: 6, arbitrary: fc.constant<number[]>([]) },
    { weight: 1, arbitrary: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }) },
  ),
  pauseMs: fc.oneof(
    { weight: 4, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 30 }) },
  ),
  end: fc.oneof({ weight: 5, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
});

function deliver(kind: string, bytes: Buffer, d: Delivery, extra: Partial<RawRequest> = {}): RawRequest {
  const cuts = [...new Set(d.splits.map((s) => (bytes.length === 0 ? 0 : s % bytes.length)))]
    .filter((c) => c > 0)
    .sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const c of cuts) {
    pieces.push(bytes.subarray(from, c));
    from = c;
  }
  pieces.push(bytes.subarray(from));
  return { kind, pieces, pauseMs: cuts.length > 0 ? d.pauseMs : 0, end: d.end, ...extra };
}

/** The cases for one server. */
export function caseArb(server: ServerKind, routes: Routes): fc.Arbitrary<FuzzCase> {
  const admission = server === 'tls';
  const paths = admission ? routes.tls : routes.plain;
  const model = modelArb(paths, routes.namespace, admission);
  const request: fc.Arbitrary<RawRequest> = fc.oneof(
    {
      weight: 30,
      arbitrary: fc
        .tuple(model, deliveryArb)
        .map(([m, d]) => deliver(`structured:${framingName(m.framing)}`, serialize(m), d)),
    },
    {
      weight: 25,
      arbitrary: fc
        .tuple(model, fc.array(byteMutationArb, { minLength: 1, maxLength: 4 }), deliveryArb)
        .map(([m, ms, d]) => deliver(`mutated:${ms.map((x) => x.op).join('+')}`, mutateBytes(serialize(m), ms), d)),
    },
    {
      weight: 4,
      arbitrary: fc
        .tuple(
          fc.array(fc.oneof(fc.constantFrom(...PIPELINE_PARTS).map(latin1), model.map(serialize)), {
            minLength: 2,
            maxLength: 5,
          }),
          deliveryArb,
        )
        .map(([parts, d]) => deliver('pipelined', Buffer.concat(parts), d)),
    },
    {
      weight: 6,
      arbitrary: fc
        .tuple(fc.uint8Array({ maxLength: 3_000 }), deliveryArb)
        .map(([b, d]) => deliver('random', Buffer.from(b), d)),
    },
    { weight: 10, arbitrary: fc.tuple(soupArb, deliveryArb).map(([b, d]) => deliver('soup', b, d)) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.constantFrom(...CRASH_TARGETS), fc.constantFrom('GET', 'POST'), deliveryArb)
        .map(([t, m, d]) => deliver('crash-target', latin1(`${m} ${t} HTTP/1.1\r\n\r\n`), d)),
    },
    {
      weight: admission ? 4 : 0,
      arbitrary: fc
        .tuple(noHandshakeArb, deliveryArb)
        .map(([b, d]) => deliver('no-handshake', b, d, { noHandshake: true })),
    },
  );
  if (!admission) return request.map((r) => ({ server, request: r }));
  const variant: fc.Arbitrary<TlsVariant | undefined> = fc.oneof(
    { weight: 12, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.record({
        maxVersion: fc.constant('TLSv1.2' as const),
        renegotiate: fc.integer({ min: 0, max: 5 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        alpn: fc
          .constantFrom('h2', 'http/1.1', 'h2,http/1.1', 'http/1.0', 'x'.repeat(255), 'h2c,spdy/3,acme-tls/1')
          .map((list) => list.split(',')),
      }),
    },
  );
  return fc.tuple(request, variant).map(([r, tls]) => ({ server, request: tls && !r.noHandshake ? { ...r, tls } : r }));
}

/** Cases for both servers, the webhook server somewhat more often (its bodies reach more code). */
export function bothServersArb(routes: Routes): fc.Arbitrary<FuzzCase> {
  return fc.oneof({ weight: 2, arbitrary: caseArb('plain', routes) }, { weight: 3, arbitrary: caseArb('tls', routes) });
}

/** The seed of one batch: a pure function of the run's seed and the batch index. */
export function batchSeed(seed: number, batch: number): number {
  return (seed ^ Math.imul(batch + 1, 0x9e3779b1)) | 0;
}

/** Batch `batch` of a run seeded `seed`: `size` cases, the same ones every time. */
export function batchAt(seed: number, batch: number, size: number, routes: Routes): FuzzCase[] {
  return fc.sample(bothServersArb(routes), { seed: batchSeed(seed, batch), numRuns: size });
}

/** The four requests of issue 16 that each killed the process. */
export const ISSUE_16_REGRESSIONS: { name: string; server: ServerKind; bytes: string }[] = [
  { name: 'GET // on the plain port', server: 'plain', bytes: 'GET // HTTP/1.1\r\nHost: localhost\r\n\r\n' },
  {
    name: 'POST // on the HTTPS port',
    server: 'tls',
    bytes: 'POST // HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
  },
  {
    name: 'GET http://a:99999/metrics (absolute form, port out of range)',
    server: 'plain',
    bytes: 'GET http://a:99999/metrics HTTP/1.1\r\nHost: localhost\r\n\r\n',
  },
  {
    name: 'POST http://[::1/admission/no-downscale (absolute form, unclosed IPv6 literal)',
    server: 'tls',
    bytes:
      'POST http://[::1/admission/no-downscale HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
  },
];
