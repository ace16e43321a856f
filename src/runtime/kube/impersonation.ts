// Impersonation from a kubeconfig user (`as`, `as-uid`, `as-groups`,
// `as-user-extra`), sent as client-go's transport sends it: Impersonate-User,
// Impersonate-Uid, one Impersonate-Group header per group, and one
// Impersonate-Extra-<key> header per value, the key percent-encoded where
// it holds a byte that cannot be in a header name (and `%` itself), as
// client-go's headerKeyEscape does.
export interface Impersonation {
  readonly user?: string | undefined;
  readonly uid?: string | undefined;
  readonly groups?: readonly string[] | undefined;
  readonly extra?: Readonly<Record<string, readonly string[]>> | undefined;
}

/** RFC 7230 token characters (Go's net/http isTokenTable): what a header name may hold. */
const TOKEN_BYTE = /^[!#$&'*+\-.^_`|~0-9A-Za-z]$/;

/** A user-extra key as a header name's tail: bytes outside the token set, and `%`, as %XX of their UTF-8 bytes. */
export function headerKeyEscape(key: string): string {
  let out = '';
  for (const byte of Buffer.from(key, 'utf8')) {
    const char = String.fromCharCode(byte);
    out += byte < 0x80 && TOKEN_BYTE.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Header values Node sends as they are: no line breaks, NUL or other control characters, nothing beyond Latin-1. */
const BAD_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** client-go's checks of the impersonation fields, plus what HTTP cannot carry: the problem in one line, or undefined. */
export function impersonationProblem(i: Impersonation): string | undefined {
  const values: [string, string | undefined][] = [
    ['as', i.user],
    ['as-uid', i.uid],
    ...(i.groups ?? []).map((g, n): [string, string] => [`as-groups[${n}]`, g]),
    ...Object.entries(i.extra ?? {}).flatMap(([key, list]) =>
      list.map((v, n): [string, string] => [`as-user-extra[${JSON.stringify(key)}][${n}]`, v]),
    ),
  ];
  for (const [field, value] of values)
    if (value !== undefined && BAD_HEADER_VALUE.test(value))
      return `${field} contains a line break or another character HTTP headers cannot carry`;
  const asks = [
    i.uid ? 'as-uid' : '',
    i.groups?.length ? 'as-groups' : '',
    Object.keys(i.extra ?? {}).length ? 'as-user-extra' : '',
  ].filter(Boolean);
  if (!i.user && asks.length > 0) return `${asks.join(', ')} needs as (the user to impersonate)`;
  return undefined;
}

/** The Impersonate-* headers; repeated headers as arrays (Node sends one header line per value). */
export function impersonationHeaders(i: Impersonation): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  if (!i.user) return headers;
  headers['Impersonate-User'] = i.user;
  if (i.uid) headers['Impersonate-Uid'] = i.uid;
  if (i.groups?.length) headers['Impersonate-Group'] = [...i.groups];
  for (const [key, values] of Object.entries(i.extra ?? {}))
    if (values.length > 0) headers[`Impersonate-Extra-${headerKeyEscape(key)}`] = [...values];
  return headers;
}
