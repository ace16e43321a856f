// What a reload alert says and how each chat service wants it said: pure
// functions from a restart's report to an HTTP body. Reloader users set
// ALERT_SINK to one of its four sinks; each one here is a payload the service
// takes as it is (the sender, reloadalerts.ts, only moves bytes):
//
// - slack: an incoming-webhook message with one attachment (as Reloader
//   sends: coloured bar, author, mrkdwn text) plus `fallback` text, which
//   Slack shows in notifications; <, > and & escaped as Slack asks.
// - teams: a message carrying one Adaptive Card. Reloader posts `{"text"}`,
//   which only the Office 365 connectors took; Microsoft retired those in
//   2026 for Workflows webhooks, which take Adaptive Cards in this envelope
//   (and so did the connectors' incoming webhooks), so one payload serves both.
// - gchat: `{"text"}`, which Google Chat renders with its own *bold*.
// - webhook (Reloader's default, also spelt `raw` in its code): the message
//   as text/plain, without the * emphasis, as Reloader sends it.
//
// The text names the workload, its namespace and the configs whose change
// caused the restart; ALERT_ADDITIONAL_INFO goes first, "<info> : <message>",
// as in Reloader, so alerts written for it still read the same.

export const ALERT_SINKS = ['slack', 'teams', 'gchat', 'webhook'] as const;
export type AlertSink = (typeof ALERT_SINKS)[number];

/** One restart, as the restart controller reports it to alerts and to the webhook-url mode. */
export interface ReloadReport {
  /** Workload kind: Deployment, StatefulSet, DaemonSet, … */
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /** The configs whose change caused it, as checksum keys: "configmap/<ns>/<name>", "secret/<ns>/<name>". */
  readonly configs: readonly string[];
  readonly outcome: 'reloaded' | 'failed';
  /** Why it failed (empty or a short note when it did not). */
  readonly message: string;
  /** When it happened, epoch milliseconds. */
  readonly at: number;
}

/** An HTTP request body and its media type. */
export interface AlertBody {
  readonly contentType: string;
  readonly body: string;
}

/**
 * The sink ALERT_SINK names (trimmed, any case; empty: Reloader's default,
 * the plain webhook), or the reason it names none.
 */
export function parseAlertSink(raw: string): AlertSink | { error: string } {
  const value = raw.trim().toLowerCase();
  if (value === '' || value === 'raw') return 'webhook';
  if ((ALERT_SINKS as readonly string[]).includes(value)) return value as AlertSink;
  return { error: `unknown alert sink ${JSON.stringify(raw)}: use one of ${ALERT_SINKS.join(', ')}` };
}

/** "ConfigMap ns/name" for a checksum key; the key itself when it is not one. */
function describeConfig(key: string): string {
  const [type, namespace, ...rest] = key.split('/');
  const name = rest.join('/');
  if (!namespace || !name) return key;
  if (type === 'configmap') return `ConfigMap ${namespace}/${name}`;
  if (type === 'secret') return `Secret ${namespace}/${name}`;
  return key;
}

type Emphasis = (text: string) => string;
const bold: Emphasis = (text) => `*${text}*`;
const plain: Emphasis = (text) => text;

/**
 * The alert's sentence, each name emphasised by `emphasis`, after the
 * additional info when there is some.
 */
export function alertText(report: ReloadReport, additionalInfo: string, emphasis: Emphasis = bold): string {
  const workload = `${emphasis(`${report.kind} ${report.namespace}/${report.name}`)}`;
  const configs = report.configs.map((key) => emphasis(describeConfig(key))).join(', ');
  const cause = configs === '' ? '' : ` after a change to ${configs}`;
  const core =
    report.outcome === 'reloaded'
      ? `Stateward restarted ${workload}${cause}.`
      : `Stateward failed to restart ${workload}${cause}: ${report.message || 'unknown error'}`;
  const info = additionalInfo.trim();
  return info === '' ? core : `${info} : ${core}`;
}

/** Slack's three control characters in message text. */
function slackEscape(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

function json(value: unknown): AlertBody {
  return { contentType: 'application/json', body: JSON.stringify(value) };
}

function slackPayload(report: ReloadReport, additionalInfo: string): AlertBody {
  return json({
    attachments: [
      {
        color: report.outcome === 'reloaded' ? 'good' : 'danger',
        author_name: 'Stateward',
        fallback: slackEscape(alertText(report, additionalInfo, plain)),
        text: slackEscape(alertText(report, additionalInfo)),
        mrkdwn_in: ['text'],
        ts: Math.floor(report.at / 1000),
      },
    ],
  });
}

function teamsPayload(report: ReloadReport, additionalInfo: string): AlertBody {
  return json({
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body: [
            {
              type: 'TextBlock',
              text: report.outcome === 'reloaded' ? 'Restarted' : 'Restart failed',
              weight: 'Bolder',
              color: report.outcome === 'reloaded' ? 'Good' : 'Attention',
            },
            // Adaptive Cards' TextBlock takes Markdown: **bold**.
            { type: 'TextBlock', text: alertText(report, additionalInfo, (t) => `**${t}**`), wrap: true },
          ],
        },
      },
    ],
  });
}

/** The request body `sink` wants for `report`. */
export function alertPayload(sink: AlertSink, report: ReloadReport, additionalInfo: string): AlertBody {
  switch (sink) {
    case 'slack':
      return slackPayload(report, additionalInfo);
    case 'teams':
      return teamsPayload(report, additionalInfo);
    case 'gchat':
      return json({ text: alertText(report, additionalInfo) });
    case 'webhook':
      return { contentType: 'text/plain; charset=utf-8', body: alertText(report, additionalInfo, plain) };
  }
}

/**
 * The body of a -webhook-url call: Reloader's one field (`webhook`, its
 * fixed "update successful"), so a receiver written for Reloader reads it
 * as before, and what it never said: which workload, because of which
 * configs, and when.
 */
export function reloadWebhookBody(report: ReloadReport): AlertBody {
  return json({
    webhook: 'update successful',
    kind: report.kind,
    namespace: report.namespace,
    name: report.name,
    configs: report.configs,
    at: new Date(report.at).toISOString(),
  });
}

/**
 * What a log may say about a webhook URL: scheme and host only. Slack, Teams
 * and Google Chat URLs carry their credential in the path or query, and a
 * proxy URL may carry a password.
 */
export function redactedEndpoint(url: URL): string {
  return `${url.protocol}//${url.host}`;
}
