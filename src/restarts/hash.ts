// Config checksums for config-change restarts: what the operator writes into
// the workload's applied-checksums annotation (xing's
// com.xing.deployment-restart.applied-config-checksums) for each ConfigMap and
// Secret, and compares later to decide whether the pods run stale config.
//
// Why HMAC rather than a plain hash: the annotation sits on the Deployment,
// StatefulSet or DaemonSet, readable by anyone who can read workloads, and
// that is often many more people than can read Secrets. A plain hash of a
// low-entropy Secret (a 6-digit PIN, a password from a short list) lets any
// such reader test guesses offline. xing stores unsalted SHA-256 truncated to
// 64 bits, Reloader unsalted SHA-1 (Reloader issue #594). Keyed with a cluster-local secret, HMAC-SHA-256 turns the annotation
// into an opaque change marker: without the key, guesses cannot be checked.
// Equal inputs still give equal checksums under one key, which is all that
// change detection needs.
//
// Framing (v1), fed to the HMAC piece by piece, never concatenated or kept:
//   "stateward/config-checksum/v1\0"
//   u8 kind          1 = ConfigMap, 2 = Secret
//   section "data"       u8 'D', u64 count, entries
//   section "binaryData" u8 'B', u64 count, entries
//   entry = u64 len, key (UTF-8) ‖ u8 form ‖ u64 len, value bytes
// All integers are big-endian. Keys are sorted by their UTF-8 bytes, so the
// object's key order never matters. Every variable-length field is
// length-prefixed, so {a:"bc"} and {ab:"c"} frame differently, and the
// section tags make moving a key from data to binaryData a change. Both
// sections are always framed, so an absent map and an empty map are the same
// thing (the API server omits empty maps anyway). Metadata is never hashed:
// label or annotation edits are not config changes.
//
// Values:
//   - ConfigMap data: the UTF-8 bytes of the string (what the API server
//     stores).
//   - ConfigMap binaryData and Secret data: base64 on the wire; the decoded
//     bytes are hashed (form 0). The API server always sends canonical padded
//     base64, so this is the usual path. Node's decoder is lenient (it skips
//     bad characters, accepts missing padding), so a value that does not
//     re-encode to exactly the same text is hashed as its raw UTF-8 text
//     under form 1 instead. Distinct inputs therefore never collapse onto
//     one decoding.
//   - Secret stringData is write-only (the API server folds it into data and
//     never returns it), so it is not read.
//
// Nothing here logs, throws with, or keeps any input: decoded and encoded
// copies are zero-filled once fed to the HMAC (best effort; JavaScript
// strings themselves cannot be scrubbed). Error messages name no keys or
// values.
import { createHash, createHmac, KeyObject, type Hmac } from 'node:crypto';
import type { ConfigKind } from './references.ts';

export const CHECKSUM_VERSION = 'v1';
export const CHECKSUM_PREFIX = `${CHECKSUM_VERSION}:`;

/** The data of a ConfigMap or Secret as it arrives over the wire. */
export interface ConfigPayload {
  data?: Record<string, string> | null;
  binaryData?: Record<string, string> | null;
}

const DOMAIN = Buffer.from('stateward/config-checksum/v1\0', 'utf8');
const KIND_TAG: Record<ConfigKind, number> = { configmap: 0x01, secret: 0x02 };
const SECTION_DATA = 0x44; // 'D'
const SECTION_BINARY = 0x42; // 'B'
const FORM_BYTES = 0x00;
const FORM_RAW_TEXT = 0x01;

const V1_PATTERN = /^v1:[0-9a-f]{64}$/;
const XING_PATTERN = /^[0-9a-f]{16}$/;

/**
 * "v1:" + 64 hex digits: HMAC-SHA-256, keyed with `key`, over the framing
 * above. `kind` says how `data` is read: text for a ConfigMap (the default),
 * base64 for a Secret. Throws only on misuse: an empty key, an unknown kind,
 * a map that is not an object, or a value that is not a string.
 */
export function configChecksum(
  key: Buffer | string | KeyObject,
  obj: ConfigPayload,
  kind: ConfigKind = 'configmap',
): string {
  const kindTag = Object.hasOwn(KIND_TAG, kind) ? KIND_TAG[kind] : undefined;
  if (kindTag === undefined) throw new TypeError('config checksum: kind must be "configmap" or "secret"');
  // A KeyObject (createSecretKey, made once) is what a hot path passes: HMAC
  // setup from one is ~3× cheaper than from bytes, which Node imports on every call.
  const keyBytes = key instanceof KeyObject ? undefined : typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  if ((keyBytes?.length ?? (key as KeyObject).symmetricKeySize ?? 0) === 0)
    throw new RangeError('config checksum: the HMAC key must not be empty');
  const mac = createHmac('sha256', keyBytes ?? key);
  if (typeof key === 'string') keyBytes?.fill(0);
  mac.update(DOMAIN);
  mac.update(Buffer.of(kindTag));
  frameSection(mac, SECTION_DATA, obj.data, kind === 'secret');
  frameSection(mac, SECTION_BINARY, obj.binaryData, true);
  return CHECKSUM_PREFIX + mac.digest('hex');
}

/**
 * Which scheme produced a stored checksum: our "v1:" HMAC, xing's 16 hex
 * digits, or something else. The restart decision uses this when it takes
 * over a workload xing managed: a legacy value is compared with
 * xingLegacyChecksum, not with configChecksum.
 */
export function checksumScheme(value: string): 'v1' | 'xing-legacy' | 'unknown' {
  if (V1_PATTERN.test(value)) return 'v1';
  if (XING_PATTERN.test(value)) return 'xing-legacy';
  return 'unknown';
}

/**
 * xing's checksum: SHA-256 of Go's json.Marshal of
 * `data` (binaryData ignored; a Secret's values are its wire base64),
 * truncated to 8 bytes, as 16 hex digits. Unkeyed, so it is only ever
 * computed to check a value xing already stored (migration without a restart
 * storm); Stateward never writes it.
 */
export function xingLegacyChecksum(obj: ConfigPayload): string {
  // For both kinds xing marshals the wire representation: strings for a
  // ConfigMap, []byte (which Go marshals as the same base64) for a Secret,
  // so the kind does not matter. Fed to the hash piece by piece: the JSON
  // text of a Secret is never built as one more string.
  const hash = createHash('sha256');
  writeGoJsonMap(obj.data, (text) => hash.update(text, 'utf8'));
  return hash.digest('hex').slice(0, 16);
}

function frameSection(mac: Hmac, tag: number, map: Record<string, string> | null | undefined, base64: boolean): void {
  if (map !== undefined && map !== null && (typeof map !== 'object' || Array.isArray(map)))
    throw new TypeError('config checksum: data and binaryData must be objects');
  const entries = map ? Object.keys(map).map((k) => ({ k, bytes: Buffer.from(k, 'utf8') })) : [];
  entries.sort((a, b) => Buffer.compare(a.bytes, b.bytes));
  mac.update(Buffer.of(tag));
  mac.update(u64(entries.length));
  for (const { k, bytes } of entries) {
    const value: unknown = map?.[k];
    if (typeof value !== 'string') throw new TypeError('config checksum: a data value is not a string');
    mac.update(u64(bytes.length));
    mac.update(bytes);
    const { form, payload } = base64 ? decodeBase64(value) : { form: FORM_BYTES, payload: Buffer.from(value, 'utf8') };
    mac.update(Buffer.of(form));
    mac.update(u64(payload.length));
    mac.update(payload);
    payload.fill(0);
  }
}

function decodeBase64(text: string): { form: number; payload: Buffer } {
  const decoded = Buffer.from(text, 'base64');
  if (decoded.toString('base64') === text) return { form: FORM_BYTES, payload: decoded };
  decoded.fill(0);
  return { form: FORM_RAW_TEXT, payload: Buffer.from(text, 'utf8') };
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

/**
 * Go's encoding/json for map[string]string as xing's Go version (< 1.22)
 * wrote it: keys sorted bytewise, HTML-safe escaping of <, > and &,
 * U+2028/U+2029 escaped, control characters other than \n \r \t as \u00XX,
 * invalid UTF-16 (which Go would have seen as invalid UTF-8) as \ufffd. A
 * nil map is "null". Written out in pieces to `write`.
 */
function writeGoJsonMap(map: Record<string, string> | null | undefined, write: (text: string) => void): void {
  if (map === undefined || map === null) return write('null');
  const keys = Object.keys(map).map((k) => ({ k, bytes: Buffer.from(k, 'utf8') }));
  keys.sort((a, b) => Buffer.compare(a.bytes, b.bytes));
  write('{');
  keys.forEach(({ k }, i) => {
    if (i > 0) write(',');
    writeGoJsonString(k, write);
    write(':');
    writeGoJsonString(String(map[k]), write);
  });
  write('}');
}

/**
 * Anything but the printable ASCII Go writes as it is (no ", &, <, >, \\):
 * text without such a character — the usual case, and every base64 Secret
 * value — is written as it is; the rest takes the exact path below. (Listing
 * what to escape instead was ~2× slower on 4 KiB values.)
 */
const NEEDS_ESCAPE = /[^\u0020\u0021\u0023-\u0025\u0027-\u003b\u003d\u003f-\u005b\u005d-\u007e]/;

function writeGoJsonString(s: string, write: (text: string) => void): void {
  write('"');
  if (!NEEDS_ESCAPE.test(s)) {
    write(s);
    return write('"');
  }
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c < 0x20 || ch === '<' || ch === '>' || ch === '&' || c === 0x2028 || c === 0x2029)
      out += `\\u${c.toString(16).padStart(4, '0')}`;
    else if (c >= 0xd800 && c <= 0xdfff) out += '\\ufffd';
    else out += ch;
  }
  write(out);
  write('"');
}
