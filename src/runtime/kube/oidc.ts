// The `oidc` auth-provider as client-go runs it (plugin/pkg/client/auth/oidc):
// the user's id-token is sent as the bearer token while its `exp` is more
// than 10 s away; after that (or after the API server answered 401 to it)
// it is refreshed with the refresh-token at the issuer's token endpoint
// (found by OpenID discovery at idp-issuer-url), the client id and secret
// sent as HTTP basic auth. The new id-token (and refresh-token, when the
// issuer rotates it) are kept in memory: unlike kubectl, Stateward never
// writes the kubeconfig. One refresh at a time serves concurrent requests.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface OidcConfig {
  readonly clientId: string;
  readonly clientSecret?: string | undefined;
  readonly idToken?: string | undefined;
  readonly refreshToken?: string | undefined;
  readonly issuerUrl: string;
  /** PEM of idp-certificate-authority(-data), read by the caller. */
  readonly ca?: Buffer | undefined;
}

/** The fields of the auth-provider's config client-go reads; the problem with them in one line, or undefined. */
export function oidcProblem(config: Readonly<Record<string, string>>): string | undefined {
  if (!config['client-id']) return 'the oidc auth-provider needs client-id';
  if (!config['idp-issuer-url']) return 'the oidc auth-provider needs idp-issuer-url';
  if (!/^https?:\/\//.test(config['idp-issuer-url']))
    return `the oidc auth-provider's idp-issuer-url ${JSON.stringify(config['idp-issuer-url'])} is not an http or https URL`;
  if (config['idp-certificate-authority'] && config['idp-certificate-authority-data'])
    return 'the oidc auth-provider has both idp-certificate-authority and idp-certificate-authority-data';
  return undefined;
}

/** The source's settings from the auth-provider's config; `readFile` reads idp-certificate-authority. */
export function oidcConfigOf(config: Readonly<Record<string, string>>, readFile: (path: string) => Buffer): OidcConfig {
  const caData = config['idp-certificate-authority-data'];
  const caFile = config['idp-certificate-authority'];
  return {
    clientId: config['client-id'] ?? '',
    clientSecret: config['client-secret'],
    idToken: config['id-token'],
    refreshToken: config['refresh-token'],
    issuerUrl: config['idp-issuer-url'] ?? '',
    ca: caData ? Buffer.from(caData, 'base64') : caFile ? readFile(caFile) : undefined,
  };
}

/** client-go's expiryDelta: an id-token this close to its exp is refreshed first. */
const EXPIRY_DELTA_MS = 10_000;
const REFRESH_TIMEOUT_MS = 30_000;
const MAX_ANSWER_BYTES = 1024 * 1024;

/** The id-token's exp in ms, or undefined when it is no JWT with a numeric exp (then it is refreshed, as client-go does). */
function expiryOf(idToken: string): number | undefined {
  const payload = idToken.split('.')[1];
  if (idToken.split('.').length !== 3 || !payload) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

function exchange(url: string, ca: Buffer | undefined, body?: string, auth?: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    if (auth) headers['authorization'] = auth;
    const options = { method: body === undefined ? 'GET' : 'POST', headers, timeout: REFRESH_TIMEOUT_MS };
    const onResponse = (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) response.destroy(new Error(`more than ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.on('error', reject);
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (response.statusCode !== 200) {
          // An OAuth error's code and description, never the rest (it may echo secrets).
          let reason = '';
          try {
            const answer = JSON.parse(text) as { error?: unknown };
            if (typeof answer.error === 'string') reason = `: ${answer.error.slice(0, 100)}`;
          } catch {
            reason = '';
          }
          reject(new Error(`${url} answered ${response.statusCode}${reason}`));
          return;
        }
        try {
          resolve(JSON.parse(text));
        } catch {
          reject(new Error(`${url} answered something other than JSON`));
        }
      });
    };
    const request = url.startsWith('https:')
      ? httpsRequest(url, { ...options, ...(ca ? { ca } : {}) }, onResponse)
      : httpRequest(url, options, onResponse);
    request.on('timeout', () => request.destroy(new Error(`${url}: no answer within ${REFRESH_TIMEOUT_MS} ms`)));
    request.on('error', (error) => reject(error));
    request.end(body);
  });
}

export class OidcTokenSource {
  private idToken: string | undefined;
  private refreshToken: string | undefined;
  private pending: Promise<string> | undefined;
  private readonly config: OidcConfig;
  private readonly now: () => number;

  constructor(config: OidcConfig, now: () => number) {
    this.config = config;
    this.idToken = config.idToken;
    this.refreshToken = config.refreshToken;
    this.now = now;
  }

  /** The id-token to send: the one held while good, else a refreshed one. Throws a one-line Error. */
  token(): Promise<string> {
    const held = this.idToken;
    const expiry = held === undefined ? undefined : expiryOf(held);
    if (held !== undefined && expiry !== undefined && this.now() + EXPIRY_DELTA_MS < expiry)
      return Promise.resolve(held);
    this.pending ??= this.refresh().finally(() => (this.pending = undefined));
    return this.pending;
  }

  /** The API server refused this id-token (401): the next request refreshes it. */
  rejected(idToken: string): void {
    if (this.idToken === idToken) this.idToken = undefined;
  }

  private async refresh(): Promise<string> {
    const { clientId, clientSecret, issuerUrl, ca } = this.config;
    if (!this.refreshToken) throw new Error('no valid id-token, and cannot refresh without refresh-token');
    let endpoint: string;
    try {
      const discovery = (await exchange(`${issuerUrl.replace(/\/+$/, '')}/.well-known/openid-configuration`, ca)) as {
        token_endpoint?: unknown;
      };
      if (typeof discovery.token_endpoint !== 'string') throw new Error('the discovery document has no token_endpoint');
      endpoint = discovery.token_endpoint;
    } catch (error) {
      throw new Error(`OpenID discovery at ${issuerUrl} failed: ${(error as Error).message.split('\n')[0]}`);
    }
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: this.refreshToken });
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret ?? '')}`).toString('base64')}`;
    let answer: { id_token?: unknown; refresh_token?: unknown };
    try {
      answer = (await exchange(endpoint, ca, form.toString(), basic)) as typeof answer;
    } catch (error) {
      throw new Error(`refreshing the id-token at ${endpoint} failed: ${(error as Error).message.split('\n')[0]}`);
    }
    if (typeof answer.id_token !== 'string' || answer.id_token === '' || /[\r\n\0]/.test(answer.id_token))
      throw new Error(`refreshing the id-token at ${endpoint}: the answer has no id_token`);
    this.idToken = answer.id_token;
    if (typeof answer.refresh_token === 'string' && answer.refresh_token !== '')
      this.refreshToken = answer.refresh_token;
    return answer.id_token;
  }
}
