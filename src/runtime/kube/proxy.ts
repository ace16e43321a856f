// Which proxy, if any, the API client connects through, by client-go's
// rules, and the CONNECT tunnel through it.
//
// - A cluster's `proxy-url` is used for every request to it (client-go's
//   http.ProxyURL: NO_PROXY does not apply).
// - Otherwise the environment, as Go's ProxyFromEnvironment
//   (golang.org/x/net/http/httpproxy): HTTPS_PROXY (or https_proxy) for an
//   https server, HTTP_PROXY (or http_proxy) for an http one, the uppercase
//   name first; a value without a scheme is an http proxy. Never for
//   `localhost` or a loopback address, nor for a host NO_PROXY (no_proxy)
//   matches: `*` (everything), an IP address (optionally with a port), a
//   CIDR, or a domain that matches itself and its subdomains (`example.com`,
//   `*.example.com` and `.example.com` match subdomains only in the last
//   two), optionally with a port.
//
// The tunnel is an HTTP CONNECT to the proxy (http or https; credentials in
// the proxy URL go as Proxy-Authorization), then TLS to the API server over
// it. An http server is tunnelled too. socks5 proxies (which client-go also
// takes) are refused with the reason.
import type { Agent, ClientRequest, IncomingMessage } from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { domainToASCII } from 'node:url';
import { http } from '../http/nodehttp.ts';

/** A proxy URL as client-go takes it (no scheme: http), or the one-line reason it is not usable. */
export function parseProxyUrl(raw: string): URL | string {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!raw.includes('://') && (!url || !/^(https?|socks5h?):$/.test(url.protocol))) {
    try {
      url = new URL(`http://${raw}`);
    } catch {
      return `${JSON.stringify(raw)} is not a proxy URL`;
    }
  }
  if (!url) return `${JSON.stringify(raw)} is not a proxy URL`;
  if (url.protocol === 'socks5:' || url.protocol === 'socks5h:')
    return `${url.protocol.slice(0, -1)} proxies are not supported (http and https are): run an http proxy in front of it`;
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return `${JSON.stringify(raw)} is not an http or https proxy URL`;
  if (!url.hostname) return `${JSON.stringify(raw)} names no proxy host`;
  return url;
}

/** A host name in ASCII (IDNA); an ASCII one as it is (WHATWG would read `0` as 0.0.0.0, Go does not). */
function ascii(host: string): string {
  return /[^\p{ASCII}]/u.test(host) ? domainToASCII(host) || host : host;
}

/** A bare host: brackets of an IPv6 literal removed, lowercased. */
function bareHost(host: string): string {
  const h = host.trim().toLowerCase();
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

/** host and port of a NO_PROXY entry, as Go's net.SplitHostPort splits it (no port: the whole entry). */
function splitHostPort(entry: string): { host: string; port: string } {
  const bracketed = /^\[([^\]]*)\]:(\d*)$/.exec(entry);
  if (bracketed) return { host: bracketed[1]!, port: bracketed[2]! };
  const colon = entry.lastIndexOf(':');
  if (colon > 0 && entry.indexOf(':') === colon) return { host: entry.slice(0, colon), port: entry.slice(colon + 1) };
  return { host: bareHost(entry), port: '' };
}

function isLoopback(ip: string): boolean {
  const list = new BlockList();
  list.addSubnet('127.0.0.0', 8, 'ipv4');
  list.addAddress('::1', 'ipv6');
  // ::ffff:127.x.y.z is IPv4's loopback too, as Go's IsLoopback says.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(ip);
  return mapped ? list.check(mapped[1]!, 'ipv4') : list.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4');
}

/** Go's IP equality: the same address however written, an IPv4 address equal to its IPv4-mapped IPv6 form. */
function sameIp(a: string, b: string): boolean {
  const unmap = (ip: string) => /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1] ?? ip;
  const [x, y] = [unmap(a), unmap(b)];
  const family = isIP(x);
  if (family !== isIP(y)) return false;
  const list = new BlockList();
  list.addAddress(x, family === 6 ? 'ipv6' : 'ipv4');
  return list.check(y, family === 6 ? 'ipv6' : 'ipv4');
}

/** Whether one NO_PROXY entry (trimmed, lowercased, not `*`) matches the target, by Go's httpproxy rules. */
function entryMatches(entry: string, target: string, targetIp: string | undefined, port: string): boolean {
  if (entry.includes('/')) {
    const [base, bits] = entry.split('/') as [string, string];
    const family = isIP(base);
    if (!targetIp || family === 0 || !/^\d+$/.test(bits) || Number(bits) > (family === 4 ? 32 : 128)) return false;
    const list = new BlockList();
    list.addSubnet(base, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
    const ip = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(targetIp)?.[1] ?? targetIp;
    return isIP(ip) === family && list.check(ip, family === 4 ? 'ipv4' : 'ipv6');
  }
  const { host, port: entryPort } = splitHostPort(entry);
  if (host === '' || (entryPort !== '' && entryPort !== port)) return false;
  if (isIP(host)) return targetIp !== undefined && sameIp(host, targetIp);
  let domain = host.startsWith('*.') ? host.slice(1) : host;
  const matchHost = !domain.startsWith('.');
  if (matchHost) domain = `.${domain}`;
  domain = ascii(domain);
  return target.endsWith(domain) || (matchHost && target === domain.slice(1));
}

/**
 * Whether NO_PROXY (and the loopback rule) lets a request to host:port go
 * direct; `port` is the one the request uses (the scheme's default when the
 * URL has none).
 */
export function bypassesProxy(noProxy: string, host: string, port: string): boolean {
  const target = bareHost(host);
  if (target === '' || target === 'localhost') return true;
  const targetIp = isIP(target) ? target : undefined;
  if (targetIp && isLoopback(targetIp)) return true;
  const asciiTarget = targetIp ? target : ascii(target);
  return noProxy
    .split(',')
    .map((raw) => raw.trim().toLowerCase())
    .some((entry) => entry === '*' || (entry !== '' && entryMatches(entry, asciiTarget, targetIp, port)));
}

function envAny(env: NodeJS.ProcessEnv, ...names: string[]): string {
  for (const name of names) {
    const value = env[name];
    if (value) return value;
  }
  return '';
}

/**
 * The proxy for requests to `server`: the cluster's proxy-url, else the
 * environment's (unless NO_PROXY or the loopback rule bypasses it); undefined
 * for a direct connection. Throws a one-line Error when the proxy URL in use
 * is not usable.
 */
export function proxyFor(server: string, proxyUrl: string | undefined, env: NodeJS.ProcessEnv): URL | undefined {
  const check = (raw: string, where: string): URL => {
    const parsed = parseProxyUrl(raw);
    if (typeof parsed === 'string') throw new Error(`${where}: ${parsed}`);
    return parsed;
  };
  if (proxyUrl) return check(proxyUrl, 'proxy-url');
  const url = new URL(server);
  const secure = url.protocol === 'https:';
  const name = secure ? 'HTTPS_PROXY' : 'HTTP_PROXY';
  const raw = envAny(env, name, name.toLowerCase());
  if (!raw) return undefined;
  const port = url.port || (secure ? '443' : '80');
  if (bypassesProxy(envAny(env, 'NO_PROXY', 'no_proxy'), url.hostname, port)) return undefined;
  return check(raw, name);
}

/** A CONNECT to the proxy fails unless it is answered within this. */
const TUNNEL_TIMEOUT_MS = 10_000;

type ConnectCallback = (error: Error | null, socket?: Socket) => void;

/**
 * Makes `agent` open its connections through a CONNECT tunnel to `proxy`
 * (then TLS over it when `secure`), keeping its pooling as it is.
 */
export function tunnelThrough(agent: Agent, proxy: URL, secure: boolean): void {
  const createConnection = (options: ConnectionOptions & { host?: string; port?: number }, done: ConnectCallback) => {
    const host = options.host ?? 'localhost';
    const authority = `${isIP(host) === 6 ? `[${host}]` : host}:${options.port ?? (secure ? 443 : 80)}`;
    const headers: Record<string, string> = { host: authority };
    if (proxy.username || proxy.password) {
      const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
      headers['proxy-authorization'] = `Basic ${Buffer.from(credentials).toString('base64')}`;
    }
    const request: ClientRequest = (proxy.protocol === 'https:' ? https : http).request({
      host: bareHost(proxy.hostname),
      port: proxy.port || (proxy.protocol === 'https:' ? 443 : 80),
      method: 'CONNECT',
      path: authority,
      headers,
      agent: false,
    });
    let settled = false;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      request.destroy();
      done(error);
    };
    const timer = setTimeout(() => {
      fail(new Error(`proxy ${proxy.host}: no answer to CONNECT within ${TUNNEL_TIMEOUT_MS} ms`));
    }, TUNNEL_TIMEOUT_MS);
    // No `code` on these errors: the API client then reports the message, which names the proxy.
    request.once('error', (error) => {
      clearTimeout(timer);
      fail(new Error(`proxy ${proxy.host}: ${error.message}`));
    });
    request.once('connect', (response: IncomingMessage, socket: Socket) => {
      clearTimeout(timer);
      if (response.statusCode !== 200) {
        socket.destroy();
        fail(new Error(`proxy ${proxy.host} refused the tunnel to ${authority}: ${response.statusCode}`));
        return;
      }
      settled = true;
      if (!secure) {
        done(null, socket);
        return;
      }
      const servername = options.servername ?? (isIP(host) ? undefined : host);
      // The agent's TLS options (ca, cert, key, …) come merged into `options`, as for a direct connection.
      done(null, tlsConnect({ ...options, socket, ...(servername ? { servername } : {}) }));
    });
    request.end();
    return undefined;
  };
  (agent as unknown as { createConnection: typeof createConnection }).createConnection = createConnection;
}
