import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { FlagSet } from '../../src/runtime/flags/flagset.ts';
import {
  alertPayload,
  alertText,
  ALERT_SINKS,
  parseAlertSink,
  redactedEndpoint,
  reloadWebhookBody,
  type ReloadReport,
} from '../../src/restarts/alertsinks.ts';
import { registerAlertFlags } from '../../src/restarts/alertflags.ts';

const report: ReloadReport = {
  kind: 'Deployment',
  namespace: 'shop',
  name: 'api',
  configs: ['configmap/shop/api-config', 'secret/shop/db'],
  outcome: 'reloaded',
  message: '',
  at: Date.UTC(2026, 10, 29, 9, 0, 0),
};

describe('alert text', () => {
  it('names the workload and the changed configs, emphasised for chat, with the additional info first', () => {
    assert.equal(
      alertText(report, ' cluster eu-1 '),
      'cluster eu-1 : Stateward restarted *Deployment shop/api* after a change to *ConfigMap shop/api-config*, *Secret shop/db*.',
    );
  });

  it('says why a restart failed', () => {
    const text = alertText({ ...report, outcome: 'failed', message: 'forbidden', configs: [] }, '');
    assert.equal(text, 'Stateward failed to restart *Deployment shop/api*: forbidden');
  });

  it('shows a key it cannot read as it is', () => {
    assert.match(alertText({ ...report, configs: ['csi/shop'] }, ''), /after a change to \*csi\/shop\*/);
  });
});

describe('alert payloads', () => {
  it('slack: one coloured attachment with mrkdwn text and a plain fallback, <>& escaped', () => {
    const { contentType, body } = alertPayload('slack', { ...report, outcome: 'failed', message: 'a<b>&c' }, 'eu');
    assert.equal(contentType, 'application/json');
    const parsed = JSON.parse(body) as { attachments: Record<string, unknown>[] };
    assert.equal(parsed.attachments.length, 1);
    const [attachment] = parsed.attachments;
    assert.equal(attachment!.color, 'danger');
    assert.equal(attachment!.author_name, 'Stateward');
    assert.deepEqual(attachment!.mrkdwn_in, ['text']);
    assert.match(String(attachment!.text), /^eu : Stateward failed to restart \*Deployment shop\/api\*/);
    assert.match(String(attachment!.text), /a&lt;b&gt;&amp;c$/);
    assert.doesNotMatch(String(attachment!.fallback), /\*/);
    assert.equal(attachment!.ts, report.at / 1000);
  });

  it('teams: an Adaptive Card in a message envelope (Workflows webhooks)', () => {
    const parsed = JSON.parse(alertPayload('teams', report, 'eu').body) as {
      type: string;
      attachments: { contentType: string; content: { type: string; version: string; body: { text: string }[] } }[];
    };
    assert.equal(parsed.type, 'message');
    assert.equal(parsed.attachments[0]!.contentType, 'application/vnd.microsoft.card.adaptive');
    const card = parsed.attachments[0]!.content;
    assert.equal(card.type, 'AdaptiveCard');
    assert.equal(card.body[0]!.text, 'Restarted');
    assert.equal(
      card.body[1]!.text,
      'eu : Stateward restarted **Deployment shop/api** after a change to **ConfigMap shop/api-config**, **Secret shop/db**.',
    );
  });

  it('gchat: a text message', () => {
    assert.deepEqual(JSON.parse(alertPayload('gchat', report, '').body), { text: alertText(report, '') });
  });

  it('webhook: the plain sentence as text/plain, as Reloader sends it', () => {
    const { contentType, body } = alertPayload('webhook', report, 'eu');
    assert.equal(contentType, 'text/plain; charset=utf-8');
    assert.equal(
      body,
      'eu : Stateward restarted Deployment shop/api after a change to ConfigMap shop/api-config, Secret shop/db.',
    );
  });

  it('any names, message and additional info make a valid body carrying the info and the names', () => {
    const text = fc.string({ unit: 'grapheme', maxLength: 30 });
    fc.assert(
      fc.property(
        fc.constantFrom(...ALERT_SINKS),
        text,
        text,
        text,
        fc.constantFrom('reloaded' as const, 'failed' as const),
        text.filter((s) => s.trim() !== ''),
        (sink, namespace, name, message, outcome, info) => {
          const r = { ...report, namespace, name, message, outcome, configs: [`configmap/${namespace}/x`] };
          const { body, contentType } = alertPayload(sink, r, info);
          // What a reader of the message sees, whatever the format.
          let shown: string;
          if (contentType.startsWith('application/json')) {
            const parsed = JSON.parse(body) as {
              text?: string;
              attachments?: { text?: string; content?: { body: { text: string }[] } }[];
            };
            shown =
              parsed.text ??
              parsed.attachments?.[0]?.text ??
              parsed.attachments?.[0]?.content?.body[1]?.text ??
              assert.fail('no text');
            if (sink === 'slack')
              shown = shown.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
          } else {
            shown = body;
          }
          assert.ok(shown.startsWith(`${info.trim()} : Stateward `), shown);
          assert.ok(shown.includes(`${namespace}/${name}`), shown);
          if (outcome === 'failed' && message !== '') assert.ok(shown.endsWith(message), shown);
        },
      ),
    );
  });

  it('webhook-url body: Reloader field plus what changed', () => {
    const { contentType, body } = reloadWebhookBody(report);
    assert.equal(contentType, 'application/json');
    assert.deepEqual(JSON.parse(body), {
      webhook: 'update successful',
      kind: 'Deployment',
      namespace: 'shop',
      name: 'api',
      configs: ['configmap/shop/api-config', 'secret/shop/db'],
      at: '2026-11-29T09:00:00.000Z',
    });
  });

  it('an endpoint for logs keeps scheme and host only', () => {
    const url = new URL('https://user:pw@hooks.slack.com:8443/services/T0/B0/TOKEN?key=k');
    assert.equal(redactedEndpoint(url), 'https://hooks.slack.com:8443');
  });
});

describe('alert sink names', () => {
  it("takes Reloader's names in any case, empty and raw as the plain webhook", () => {
    assert.equal(parseAlertSink(' Slack '), 'slack');
    assert.equal(parseAlertSink('TEAMS'), 'teams');
    assert.equal(parseAlertSink('gchat'), 'gchat');
    assert.equal(parseAlertSink(''), 'webhook');
    assert.equal(parseAlertSink('raw'), 'webhook');
    assert.deepEqual(parseAlertSink('discord'), {
      error: 'unknown alert sink "discord": use one of slack, teams, gchat, webhook',
    });
  });
});

describe('alert flags', () => {
  const SECRET_URL = 'https://hooks.slack.com/services/T0/B0/SECRETTOKEN';
  const parse = (env: Record<string, string>, argv: string[] = []) => {
    const fs = new FlagSet('stateward');
    const flags = registerAlertFlags(fs);
    const result = fs.parse(argv, env);
    assert.equal(result.kind, 'ok', result.kind === 'error' ? result.message : '');
    return flags;
  };

  it("reads Reloader's environment variables", () => {
    const flags = parse({
      ALERT_ON_RELOAD: 'true',
      ALERT_SINK: 'Slack',
      ALERT_WEBHOOK_URL: SECRET_URL,
      ALERT_ADDITIONAL_INFO: ' prod ',
      ALERT_WEBHOOK_PROXY: 'proxy.internal:3128',
    });
    assert.equal(flags.validate(), undefined);
    const { alerts, webhookUrl } = flags.read();
    assert.equal(webhookUrl, undefined);
    assert.equal(alerts?.sink, 'slack');
    assert.equal(alerts?.url.href, SECRET_URL);
    assert.equal(alerts?.additionalInfo, 'prod');
    assert.equal(alerts?.proxy?.href, 'http://proxy.internal:3128/');
  });

  it('defaults to no alerts and the plain webhook sink; flags beat the environment', () => {
    assert.deepEqual(parse({}).read(), { alerts: undefined, webhookUrl: undefined });
    const flags = parse({ ALERT_SINK: 'teams' }, ['--alert-on-reload', `--alert-webhook-url=${SECRET_URL}`]);
    assert.equal(flags.read().alerts?.sink, 'teams');
    assert.equal(parse({}, ['--alert-on-reload', `--alert-webhook-url=${SECRET_URL}`]).read().alerts?.sink, 'webhook');
  });

  it('refuses to start on settings that could never deliver, without repeating the URL', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [
        { ALERT_ON_RELOAD: 'true' },
        /-alert-on-reload \(ALERT_ON_RELOAD\) is true but -alert-webhook-url \(ALERT_WEBHOOK_URL\) is not set/,
      ],
      [
        { ALERT_ON_RELOAD: 'true', ALERT_WEBHOOK_URL: 'SECRETTOKEN' },
        /ALERT_WEBHOOK_URL\) is not an http or https URL/,
      ],
      [{ ALERT_ON_RELOAD: 'true', ALERT_WEBHOOK_URL: 'ftp://x/SECRETTOKEN' }, /not an http or https URL/],
      [
        { ALERT_ON_RELOAD: 'true', ALERT_WEBHOOK_URL: SECRET_URL, ALERT_SINK: 'discord' },
        /unknown alert sink "discord"/,
      ],
      [
        {
          ALERT_ON_RELOAD: 'true',
          ALERT_WEBHOOK_URL: SECRET_URL,
          ALERT_WEBHOOK_PROXY: 'socks5://u:SECRETTOKEN@p:1080',
        },
        /ALERT_WEBHOOK_PROXY\) is not supported \(socks5/,
      ],
      [
        { ALERT_ON_RELOAD: 'true', ALERT_WEBHOOK_URL: SECRET_URL, ALERT_WEBHOOK_PROXY: 'ftp://u:SECRETTOKEN@p' },
        /ALERT_WEBHOOK_PROXY\) is not an http or https proxy URL/,
      ],
    ];
    for (const [env, expected] of cases) {
      const message = parse(env).validate();
      assert.match(message ?? '', expected, JSON.stringify(env));
      assert.doesNotMatch(message!, /SECRETTOKEN/);
    }
    assert.match(parse({}, ['--webhook-url=not a url']).validate() ?? '', /^-webhook-url is not an http or https URL$/);
  });

  it('leaves the other alert settings unchecked while alerts are off, as Reloader ignores them', () => {
    const flags = parse({ ALERT_ON_RELOAD: 'false', ALERT_SINK: 'discord', ALERT_WEBHOOK_URL: 'nope' });
    assert.equal(flags.validate(), undefined);
    assert.equal(flags.read().alerts, undefined);
  });

  it('an ALERT_ON_RELOAD that is no boolean is a usage error', () => {
    const fs = new FlagSet('stateward');
    registerAlertFlags(fs);
    const result = fs.parse([], { ALERT_ON_RELOAD: 'yes' });
    assert.equal(result.kind, 'error');
    assert.match(result.kind === 'error' ? result.message : '', /environment variable ALERT_ON_RELOAD/);
  });

  it('reads -webhook-url', () => {
    assert.equal(
      parse({}, ['--webhook-url=http://hook.local:8080/reload']).read().webhookUrl?.href,
      'http://hook.local:8080/reload',
    );
  });
});
