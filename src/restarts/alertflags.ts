// Reloader's alert settings and its -webhook-url, as flags of Stateward's
// command line. Reloader reads the alert settings only from its environment
// (ALERT_ON_RELOAD, ALERT_SINK, ALERT_WEBHOOK_URL, ALERT_ADDITIONAL_INFO,
// ALERT_WEBHOOK_PROXY), so each flag falls back on that variable and a
// Reloader Deployment's env keeps working with the image swapped.
//
// Where Reloader would start and then fail at every restart (alerts on with
// no URL, a URL that is not one, a sink it does not know — which Reloader
// quietly takes as its plain webhook), Stateward refuses to start and says
// why. Alerts off leaves the other settings unchecked, as Reloader ignores
// them then. Messages never repeat a webhook URL: it is a credential.
import type { FlagSet } from '../runtime/flags/flagset.ts';
import { parseProxyUrl } from '../runtime/kube/proxy.ts';
import { parseAlertSink, type AlertSink } from './alertsinks.ts';

/** Where and how reload alerts go. */
export interface AlertTarget {
  readonly sink: AlertSink;
  readonly url: URL;
  /** ALERT_ADDITIONAL_INFO, trimmed; empty for none. */
  readonly additionalInfo: string;
  /** ALERT_WEBHOOK_PROXY; undefined: the environment's HTTPS_PROXY/HTTP_PROXY/NO_PROXY, as for API calls. */
  readonly proxy: URL | undefined;
}

export interface AlertSettings {
  /** Undefined when ALERT_ON_RELOAD is not true. */
  readonly alerts: AlertTarget | undefined;
  /** -webhook-url: call this instead of restarting; undefined: restart. */
  readonly webhookUrl: URL | undefined;
}

export interface AlertFlags {
  /** The first problem with the alert flags (a usage error), or undefined when they hold together. */
  validate(): string | undefined;
  /** The settings; call only once validate() found nothing. */
  read(): AlertSettings;
}

/** An http or https URL, or undefined. Never echoes the text: it may hold a token. */
function httpUrl(text: string): URL | undefined {
  try {
    const url = new URL(text.trim());
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' ? url : undefined;
  } catch {
    return undefined;
  }
}

/** The flag and its variable, as a message names them. */
const named = (flag: string, env: string | undefined) => (env ? `-${flag} (${env})` : `-${flag}`);

export function registerAlertFlags(fs: FlagSet): AlertFlags {
  const enabled = fs.bool(
    'alert-on-reload',
    false,
    'Send an alert after each config restart to -alert-webhook-url (Reloader).',
    { env: 'ALERT_ON_RELOAD' },
  );
  const sink = fs.string(
    'alert-sink',
    'webhook',
    'Where reload alerts go: slack, teams, gchat, or webhook (the message as plain text) (Reloader).',
    { env: 'ALERT_SINK' },
  );
  const url = fs.string(
    'alert-webhook-url',
    '',
    'The webhook URL reload alerts are POSTed to; needed with -alert-on-reload. Treated as a secret (Reloader).',
    { env: 'ALERT_WEBHOOK_URL' },
  );
  const info = fs.string(
    'alert-additional-info',
    '',
    'Text put before every reload alert, such as the cluster name (Reloader).',
    { env: 'ALERT_ADDITIONAL_INFO' },
  );
  const proxy = fs.string(
    'alert-webhook-proxy',
    '',
    'HTTP(S) proxy for reload alerts (CONNECT); empty: HTTPS_PROXY/HTTP_PROXY/NO_PROXY as for API calls (Reloader).',
    { env: 'ALERT_WEBHOOK_PROXY' },
  );
  const webhookUrl = fs.string(
    'webhook-url',
    '',
    'POST to this URL instead of restarting a workload whose configs changed (Reloader); the change is then recorded as applied.',
  );

  const validate = (): string | undefined => {
    if (webhookUrl.value !== '' && !httpUrl(webhookUrl.value))
      return `${named('webhook-url', undefined)} is not an http or https URL`;
    if (!enabled.value) return undefined;
    const parsedSink = parseAlertSink(sink.value);
    if (typeof parsedSink !== 'string') return `${named('alert-sink', sink.env)}: ${parsedSink.error}`;
    if (url.value.trim() === '')
      return `${named('alert-on-reload', enabled.env)} is true but ${named('alert-webhook-url', url.env)} is not set`;
    if (!httpUrl(url.value)) return `${named('alert-webhook-url', url.env)} is not an http or https URL`;
    if (proxy.value.trim() !== '' && typeof parseProxyUrl(proxy.value.trim()) === 'string') {
      // parseProxyUrl's reason quotes the URL, which may hold a password: say it without.
      const socks = /^socks5h?:/i.test(proxy.value.trim());
      return `${named('alert-webhook-proxy', proxy.env)} is not ${socks ? 'supported (socks5; http and https proxies are)' : 'an http or https proxy URL'}`;
    }
    return undefined;
  };

  const read = (): AlertSettings => {
    const parsedSink = parseAlertSink(sink.value);
    const target = httpUrl(url.value);
    const parsedProxy = proxy.value.trim() === '' ? undefined : parseProxyUrl(proxy.value.trim());
    const alerts =
      enabled.value && typeof parsedSink === 'string' && target
        ? {
            sink: parsedSink,
            url: target,
            additionalInfo: info.value.trim(),
            proxy: parsedProxy instanceof URL ? parsedProxy : undefined,
          }
        : undefined;
    return { alerts, webhookUrl: webhookUrl.value === '' ? undefined : httpUrl(webhookUrl.value) };
  };
  return { validate, read };
}
