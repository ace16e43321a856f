import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { operatorPermissions } from '../../src/doctor/access.ts';
import { diagnose } from '../../src/doctor/checks.ts';
import { reschedulePaths, strimziProfileOn } from '../../src/doctor/checks/drainprofiles.ts';
import type { Deployment, DoctorInput, WebhookConfigurationObject } from '../../src/doctor/checks/scope.ts';
import type { KubeClient } from '../../src/runtime/kube/client.ts';

const NS = 'kafka';

function operator(args: string[], env: { name: string; value?: string }[] = []): Deployment {
  return {
    metadata: { name: 'rollout-operator', namespace: NS, labels: { name: 'rollout-operator' } },
    spec: {
      selector: { matchLabels: { name: 'rollout-operator' } },
      template: {
        metadata: { labels: { name: 'rollout-operator' } },
        spec: {
          serviceAccountName: 'rollout-operator',
          containers: [{ name: 'operator', image: 'ghcr.io/stateward/stateward:0.1.0', args, env }],
        },
      },
    },
    status: { replicas: 1, availableReplicas: 1 },
  };
}

/** A shipped configuration of deploy/webhooks for namespace NS, with the CA injected. */
function shipped(file: string, failurePolicy?: 'Ignore'): WebhookConfigurationObject {
  const text = readFileSync(new URL(`../../deploy/webhooks/${file}.yaml`, import.meta.url), 'utf8');
  const config = parse(text.replaceAll('NAMESPACE', NS)) as WebhookConfigurationObject;
  for (const w of config.webhooks ?? []) {
    w.clientConfig = { ...w.clientConfig, caBundle: 'LS0tLS1CRUdJTi...' };
    if (failurePolicy) w.failurePolicy = failurePolicy;
  }
  return config;
}

function input(d: Deployment, configs: WebhookConfigurationObject[]): DoctorInput {
  return {
    now: Date.parse('2026-11-29T12:00:00Z'),
    namespaces: [NS],
    statefulSets: [],
    pods: [],
    zpdbs: [],
    deployments: [d],
    daemonSets: [],
    configMaps: [],
    secrets: [],
    validatingWebhookConfigurations: configs,
    mutatingWebhookConfigurations: [],
  };
}

const TLS = ['-kubernetes.namespace=kafka', '-server-tls.enabled'];
const codes = (i: DoctorInput) => diagnose(i).map((f) => `${f.severity} ${f.code}`);

describe('doctor: reschedule profiles and Strimzi Drain Cleaner’s surface (issue 38)', () => {
  it('reads the profiles as the operator does: flags, STRIMZI_* variables, a profiles file', () => {
    assert.deepEqual(reschedulePaths(operator(TLS)), []);
    assert.deepEqual(reschedulePaths(operator([...TLS, '-reschedule.enabled'])), ['/admission/reschedule-on-eviction']);
    assert.deepEqual(reschedulePaths(operator([...TLS, '-reschedule.profiles-file=/etc/p.yaml'])), [
      '/admission/reschedule-on-eviction',
    ]);
    const drainCleanerEnv = operator(TLS, [{ name: 'STRIMZI_DRAIN_NAMESPACES', value: 'kafka' }]);
    assert.ok(strimziProfileOn(drainCleanerEnv));
    assert.deepEqual(reschedulePaths(drainCleanerEnv), ['/admission/reschedule-on-eviction', '/drainer']);
    assert.deepEqual(reschedulePaths(operator([...TLS, '-reschedule.strimzi.drain-zookeeper=false'])), [
      '/admission/reschedule-on-eviction',
      '/drainer',
    ]);
    assert.ok(!strimziProfileOn(operator([...TLS, '-reschedule.strimzi.enabled=false'])));
    // The deny code alone turns nothing on, as in the operator.
    assert.ok(!strimziProfileOn(operator([...TLS, '-reschedule.strimzi.deny-code=500'])));
    // Nothing is served over HTTPS without -server-tls.enabled.
    assert.deepEqual(reschedulePaths(operator(['-reschedule.strimzi.enabled'])), []);
  });

  it('accepts a /drainer configuration calling an operator with the Strimzi profile, and says when nothing serves it', () => {
    const drainer = shipped('strimzi-drain-cleaner');
    assert.deepEqual(codes(input(operator(TLS, [{ name: 'STRIMZI_DRAIN_KAFKA', value: 'true' }]), [drainer])), []);
    assert.deepEqual(codes(input(operator([...TLS, '-reschedule.strimzi.enabled']), [drainer])), []);

    // Only the Couchbase profile: /admission/reschedule-on-eviction is served, /drainer answers 404.
    const [missing, ...rest] = diagnose(input(operator([...TLS, '-reschedule.enabled']), [drainer]));
    assert.deepEqual(rest, []);
    assert.equal(missing!.code, 'reschedule-webhook-not-served');
    assert.equal(missing!.severity, 'error');
    assert.equal(missing!.object, 'ValidatingWebhookConfiguration strimzi-drain-cleaner-kafka');
    assert.match(
      missing!.problem,
      /calls \/drainer on the operator, but Deployment kafka\/rollout-operator serves no Strimzi profile there/,
    );
    assert.match(missing!.problem, /every eviction it covers is refused and drains stop/);
    assert.match(missing!.fix, /STRIMZI_DRAIN_NAMESPACES/);

    // Drain Cleaner ships failurePolicy Ignore: a brokers' drain then evicts them directly while no replica answers.
    const ignoring = diagnose(
      input(operator([...TLS, '-reschedule.strimzi.enabled']), [shipped('strimzi-drain-cleaner', 'Ignore')]),
    );
    assert.deepEqual(
      ignoring.map((f) => `${f.severity} ${f.code}`),
      ['error webhook-failure-policy-ignore'],
    );
    assert.match(ignoring[0]!.problem, /\(reschedule-on-eviction\) has failurePolicy Ignore/);
  });

  it('the reschedule path with no profile at all: an error under Fail, a warning under Ignore', () => {
    assert.deepEqual(codes(input(operator(TLS), [shipped('reschedule-on-eviction')])), [
      'error reschedule-webhook-not-served',
    ]);
    const ignoring = codes(input(operator(TLS), [shipped('reschedule-on-eviction', 'Ignore')]));
    assert.ok(ignoring.includes('warning reschedule-webhook-not-served'), ignoring.join(', '));
    assert.deepEqual(
      codes(
        input(operator(TLS, [{ name: 'STRIMZI_DRAIN_NAMESPACES', value: '*' }]), [shipped('reschedule-on-eviction')]),
      ),
      [],
    );
  });

  it('asks for the reschedule permissions when only the Strimzi variables turn the feature on', async () => {
    const asked: { verb: string; resource: string; name?: string }[] = [];
    const client = {
      create: (
        _: unknown,
        review: { spec: { resourceAttributes: { verb: string; resource: string; name?: string } } },
      ) => {
        asked.push(review.spec.resourceAttributes);
        return Promise.resolve({ status: { allowed: review.spec.resourceAttributes.resource !== 'nodes' } });
      },
    } as unknown as KubeClient;
    const d = operator(
      [...TLS, '-webhooks.ca-bundle-configurations=stateward-strimzi-drain-cleaner'],
      [{ name: 'STRIMZI_DRAIN_NAMESPACES', value: 'kafka' }],
    );
    const [result] = (await operatorPermissions(client, [d]))!;
    assert.ok(
      asked.some((a) => a.verb === 'patch' && a.resource === 'pods'),
      'annotating the pods it moves',
    );
    assert.ok(
      asked.some((a) => a.resource === 'configmaps' && a.name === 'stateward-reschedule-tracking'),
      'the tracking ConfigMap',
    );
    const webhookNames = asked.filter((a) => a.resource === 'validatingwebhookconfigurations').map((a) => a.name);
    assert.ok(webhookNames.includes('stateward-strimzi-drain-cleaner'), webhookNames.join(', '));
    assert.ok(!webhookNames.includes('stateward-reschedule-on-eviction'), 'only the configurations it injects');
    assert.deepEqual(
      result!.missing.map((m) => `${m.verbs.join(',')} ${m.resource}`),
      ['get nodes'],
    );

    asked.length = 0;
    await operatorPermissions(client, [operator(TLS)]);
    assert.ok(!asked.some((a) => a.resource === 'nodes'), 'no reschedule permissions without a profile');
  });
});
