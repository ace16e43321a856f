// The path of an HTTP request target, read without ever throwing. Both of
// Stateward's servers route on exact paths, so all they need from a target
// is its path; `new URL(target, base)` throws on targets a client may send
// on purpose (`//`, `http://a:99999/`, `http://[::1/`), and a throw in a
// request listener ends the process. This reads the four forms RFC 9112
// §3.2 allows and refuses everything else with a reason.

/** Longest request target accepted; Node already caps the whole header block at 16 KiB. */
export const MAX_TARGET_LENGTH = 8192;

export type ParsedTarget = { ok: true; path: string } | { ok: false; status: 400 | 414; reason: string };

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
// A registered name or IPv4 address: unreserved, sub-delims and percent-escapes (RFC 3986 §3.2.2).
const REG_NAME = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/;
const IPV6_LITERAL = /^\[[0-9A-Fa-f:.]+(?:%25[A-Za-z0-9\-._~]+)?\]$/;
// Characters RFC 3986 allows in a path, a query and a percent-escape's digits.
const PATH_CHARS = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;
const QUERY_CHARS = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$/;

function refuse(reason: string, status: 400 | 414 = 400): ParsedTarget {
  return { ok: false, status, reason };
}

/** The authority of an absolute-form target is a host and an optional port in 0–65535. */
function authorityProblem(authority: string): string | undefined {
  const at = authority.lastIndexOf('@');
  const hostPort = at >= 0 ? authority.slice(at + 1) : authority;
  let host = hostPort;
  let port: string | undefined;
  if (hostPort.startsWith('[')) {
    const close = hostPort.indexOf(']');
    if (close < 0) return 'unclosed IPv6 address in the request target';
    host = hostPort.slice(0, close + 1);
    const rest = hostPort.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return 'unexpected characters after the IPv6 address in the request target';
      port = rest.slice(1);
    }
    if (!IPV6_LITERAL.test(host)) return 'malformed IPv6 address in the request target';
  } else {
    const colon = hostPort.lastIndexOf(':');
    if (colon >= 0) {
      host = hostPort.slice(0, colon);
      port = hostPort.slice(colon + 1);
    }
    if (!REG_NAME.test(host)) return 'malformed host in the request target';
  }
  if (port !== undefined && port !== '' && (!/^[0-9]{1,5}$/.test(port) || Number(port) > 65535))
    return 'malformed port in the request target';
  return undefined;
}

/**
 * The path of `target` (origin-form `/p?q` or absolute-form
 * `http://host:port/p?q`), kept as sent — no percent-decoding, no dot-segment
 * removal — so it routes only when it is exactly a served path. Never throws.
 */
export function parseRequestTarget(target: string | undefined): ParsedTarget {
  if (target === undefined || target === '') return refuse('empty request target');
  if (target.length > MAX_TARGET_LENGTH)
    return refuse(`request target longer than ${MAX_TARGET_LENGTH} characters`, 414);
  let pathAndQuery: string;
  if (target.startsWith('/')) {
    pathAndQuery = target;
  } else {
    const scheme = SCHEME.exec(target);
    if (!scheme)
      return refuse(
        target === '*'
          ? 'asterisk-form request target (OPTIONS *) is not served'
          : 'request target is neither a path nor an absolute URL',
      );
    const rest = target.slice(scheme[0].length);
    const end = rest.search(/[/?#]/);
    const authority = end < 0 ? rest : rest.slice(0, end);
    const problem = authorityProblem(authority);
    if (problem) return refuse(problem);
    pathAndQuery = end < 0 ? '/' : rest.slice(end);
    if (pathAndQuery.startsWith('?')) pathAndQuery = `/${pathAndQuery}`;
  }
  const hash = pathAndQuery.indexOf('#');
  if (hash >= 0) return refuse('fragment in the request target');
  const question = pathAndQuery.indexOf('?');
  const path = question < 0 ? pathAndQuery : pathAndQuery.slice(0, question);
  const query = question < 0 ? '' : pathAndQuery.slice(question + 1);
  if (!path.startsWith('/')) return refuse('request path does not start with "/"');
  if (!PATH_CHARS.test(path)) return refuse('invalid characters or percent-escapes in the request path');
  if (!QUERY_CHARS.test(query)) return refuse('invalid characters or percent-escapes in the request query');
  return { ok: true, path };
}
