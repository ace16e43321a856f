import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { KubeObject, Pod, StatefulSet } from '../../src/runtime/kube/types.ts';
import { diagnose } from '../../src/doctor/checks.ts';
import {
  shellQuote,
  type Deployment,
  type DoctorInput,
  type Finding,
  type WebhookConfigurationObject,
} from '../../src/doctor/checks/scope.ts';

const NS = 'mimir';
const NOW = Date.parse('2026-11-22T12:00:00Z');
const ZONES = ['a', 'b', 'c'];

function zone(
  z: string,
  o: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    strategy?: string;
    replicas?: number;
    templateLabels?: Record<string, string>;
    templateAnnotations?: Record<string, string>;
  } = {},
): StatefulSet {
  const name = `ingester-zone-${z}`;
  return {
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      labels: o.labels ?? { 'rollout-group': 'ingester' },
      annotations: o.annotations ?? {},
    },
    spec: {
      replicas: o.replicas ?? 2,
      serviceName: 'ingester',
      selector: { matchLabels: { name } },
      updateStrategy: { type: o.strategy ?? 'OnDelete' },
      template: {
        metadata: {
          labels: o.templateLabels ?? { name, 'rollout-group': 'ingester' },
          annotations: o.templateAnnotations ?? {},
        },
        spec: { containers: [{ name: 'ingester', image: 'grafana/mimir:2' }] },
      },
    },
    status: { replicas: 2, readyReplicas: 2, currentRevision: `${name}-1`, updateRevision: `${name}-1` },
  };
}

function podsOf(sts: StatefulSet, revision = sts.status?.updateRevision): Pod[] {
  const name = sts.metadata!.name!;
  return Array.from({ length: sts.spec?.replicas ?? 1 }, (_, i) => ({
    metadata: {
      name: `${name}-${i}`,
      namespace: sts.metadata!.namespace!,
      labels: { ...sts.spec!.template.metadata!.labels, 'controller-revision-hash': revision ?? '' },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'StatefulSet', name, uid: sts.metadata!.uid!, controller: true },
      ],
    },
  }));
}

function zpdb(name: string, spec: Record<string, unknown>, namespace = NS): KubeObject {
  return {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'ZoneAwarePodDisruptionBudget',
    metadata: { name, namespace },
    spec,
  } as KubeObject;
}

function operatorDeployment(
  args = ['-kubernetes.namespace=$(POD_NAMESPACE)', '-server-tls.enabled=true', '-config-restarts.enabled'],
): Deployment {
  return {
    metadata: { name: 'rollout-operator', namespace: NS, labels: { name: 'rollout-operator' } },
    spec: {
      selector: { matchLabels: { name: 'rollout-operator' } },
      template: {
        metadata: { labels: { name: 'rollout-operator' } },
        spec: { containers: [{ name: 'rollout-operator', image: 'ghcr.io/stateward/stateward:0.1.0', args }] },
      },
    },
    status: { replicas: 1, availableReplicas: 1 },
  };
}

function distributor(
  annotations: Record<string, string> = { 'com.xing.deployment-restart': 'enabled' },
  optional = false,
): Deployment {
  return {
    metadata: { name: 'distributor', namespace: NS, annotations },
    spec: {
      selector: { matchLabels: { name: 'distributor' } },
      template: {
        metadata: { labels: { name: 'distributor' } },
        spec: {
          containers: [
            {
              name: 'distributor',
              image: 'grafana/mimir:2',
              env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'token', key: 'token' } } }],
              volumeMounts: [{ name: 'runtime', mountPath: '/etc/runtime' }],
            },
          ],
          volumes: [{ name: 'runtime', configMap: { name: 'runtime-config', optional } }],
        },
      },
    },
  };
}

/** The shipped rollout-operator-shaped webhook configurations, for namespace NS, with the CA injected. */
function shippedWebhooks(dir = 'deploy/webhooks'): {
  validating: WebhookConfigurationObject[];
  mutating: WebhookConfigurationObject[];
} {
  const validating: WebhookConfigurationObject[] = [];
  const mutating: WebhookConfigurationObject[] = [];
  for (const file of ['no-downscale', 'pod-eviction', 'prepare-downscale']) {
    const text = readFileSync(new URL(`../../${dir}/${file}.yaml`, import.meta.url), 'utf8').replaceAll(
      'NAMESPACE',
      NS,
    );
    for (const doc of parseAllDocuments(text)) {
      const config = doc.toJS() as WebhookConfigurationObject | null;
      if (!config) continue;
      for (const w of config.webhooks ?? []) w.clientConfig = { ...w.clientConfig, caBundle: 'LS0tLS1CRUdJTi...' };
      (config.kind === 'MutatingWebhookConfiguration' ? mutating : validating).push(config);
    }
  }
  return { validating, mutating };
}

/** A healthy namespace: a three-zone group under a ZPDB, an opted-in Deployment with its configs, the operator and its webhooks. */
function clean(): DoctorInput {
  const sets = ZONES.map((z) => zone(z));
  const webhooks = shippedWebhooks();
  return {
    now: NOW,
    namespaces: [NS],
    statefulSets: sets,
    pods: sets.flatMap((s) => podsOf(s)),
    zpdbs: [zpdb('ingester', { maxUnavailable: 1, selector: { matchLabels: { 'rollout-group': 'ingester' } } })],
    deployments: [operatorDeployment(), distributor()],
    daemonSets: [],
    configMaps: [{ metadata: { name: 'runtime-config', namespace: NS } }],
    secrets: [{ metadata: { name: 'token', namespace: NS } }],
    validatingWebhookConfigurations: webhooks.validating,
    mutatingWebhookConfigurations: webhooks.mutating,
  };
}

function withZone(input: DoctorInput, z: string, sts: StatefulSet): DoctorInput {
  return {
    ...input,
    statefulSets: input.statefulSets.map((s) => (s.metadata?.name === `ingester-zone-${z}` ? sts : s)),
  };
}

function only(findings: Finding[], code: string): Finding {
  const matching = findings.filter((f) => f.code === code);
  assert.equal(matching.length, 1, `one ${code} finding expected, got ${JSON.stringify(findings, null, 2)}`);
  return matching[0]!;
}

function codes(findings: Finding[]): string[] {
  return findings.map((f) => f.code);
}

describe('stateward doctor checks', () => {
  it('finds nothing wrong in a healthy namespace with the shipped webhook configurations', () => {
    assert.deepEqual(diagnose(clean()), []);
  });

  it('finds nothing wrong with the kustomize webhook configurations (service stateward) either', () => {
    const webhooks = shippedWebhooks('deploy/kustomize/components/webhooks');
    const operator = operatorDeployment();
    const stateward: Deployment = {
      ...operator,
      metadata: { name: 'stateward', namespace: 'stateward', labels: { 'app.kubernetes.io/name': 'stateward' } },
      spec: {
        ...operator.spec!,
        template: { ...operator.spec!.template, metadata: { labels: { 'app.kubernetes.io/name': 'stateward' } } },
      },
    };
    const input = {
      ...clean(),
      namespaces: undefined,
      deployments: [stateward],
      validatingWebhookConfigurations: webhooks.validating,
      mutatingWebhookConfigurations: webhooks.mutating,
    };
    assert.deepEqual(diagnose(input), []);
  });

  describe('labels versus annotations', () => {
    it('reports a label key set as an annotation (#306), with the command that moves it', () => {
      const input = withZone(
        clean(),
        'a',
        zone('a', {
          annotations: {
            'grafana.com/prepare-downscale': 'true',
            'grafana.com/min-time-between-zones-downscale': '12h',
          },
        }),
      );
      const findings = diagnose(input).filter((f) => f.code === 'key-should-be-label');
      // min-time is read from the annotation first since rollout-operator v0.39 (#463): not misplaced.
      assert.equal(findings.length, 1);
      for (const f of findings) {
        assert.equal(f.severity, 'error');
        assert.equal(f.object, 'StatefulSet mimir/ingester-zone-a');
      }
      const prepare = findings.find((f) => f.problem.includes('grafana.com/prepare-downscale'))!;
      assert.match(prepare.problem, /set as an annotation, but it is read only as a label/);
      assert.match(
        prepare.fix,
        /kubectl -n mimir label statefulset\/ingester-zone-a grafana\.com\/prepare-downscale=true && kubectl -n mimir annotate statefulset\/ingester-zone-a grafana\.com\/prepare-downscale-/,
      );
    });

    it('says which value is read when a key is both a label and an annotation (a warning)', () => {
      const input = withZone(
        clean(),
        'a',
        zone('a', { labels: { 'rollout-group': 'ingester' }, annotations: { 'rollout-group': 'other' } }),
      );
      const f = only(diagnose(input), 'key-should-be-label');
      assert.equal(f.severity, 'warning');
      assert.match(f.problem, /only the label \("ingester"\) is read/);
      assert.match(f.fix, /annotate statefulset\/ingester-zone-a rollout-group-/);
    });

    it('min-time (#463): the label alone is deprecated, a warning with the commands that move it', () => {
      const input = withZone(
        clean(),
        'a',
        zone('a', { labels: { 'rollout-group': 'ingester', 'grafana.com/min-time-between-zones-downscale': '12h' } }),
      );
      const findings = diagnose(input);
      const f = only(findings, 'min-time-label-deprecated');
      assert.equal(f.severity, 'warning');
      assert.equal(f.object, 'StatefulSet mimir/ingester-zone-a');
      assert.match(f.problem, /is set as a label: it is read .* deprecated since rollout-operator v0\.39/);
      assert.ok(
        f.fix.startsWith(
          'move it to an annotation: kubectl -n mimir annotate statefulset/ingester-zone-a grafana.com/min-time-between-zones-downscale=12h && kubectl -n mimir label statefulset/ingester-zone-a grafana.com/min-time-between-zones-downscale-;',
        ),
        f.fix,
      );
      assert.ok(!findings.some((x) => x.severity === 'error'), JSON.stringify(findings));
    });

    it('min-time (#463): as an annotation it is right; beside a label, the annotation wins and the doctor says so', () => {
      const key = 'grafana.com/min-time-between-zones-downscale';
      const annotated = withZone(clean(), 'a', zone('a', { annotations: { [key]: '12h' } }));
      assert.deepEqual(diagnose(annotated), []);
      const both = withZone(
        clean(),
        'a',
        zone('a', { labels: { 'rollout-group': 'ingester', [key]: 'x' }, annotations: { [key]: '1h' } }),
      );
      const findings = diagnose(both);
      // The ignored label's bad value is not an error: it is not read.
      assert.deepEqual(
        findings.map((f) => f.code),
        ['min-time-label-ignored'],
      );
      assert.equal(findings[0]!.severity, 'warning');
      assert.match(findings[0]!.problem, /the annotation is read and the label is ignored/);
      assert.match(
        findings[0]!.fix,
        /kubectl -n mimir label statefulset\/ingester-zone-a grafana\.com\/min-time-between-zones-downscale-/,
      );
    });

    it('min-time (#463): a bad annotation value is an error with the annotate command', () => {
      const input = withZone(
        clean(),
        'a',
        zone('a', { annotations: { 'grafana.com/min-time-between-zones-downscale': '1d' } }),
      );
      const f = only(diagnose(input), 'invalid-min-time');
      assert.equal(f.severity, 'error');
      assert.match(f.problem, /annotation grafana\.com\/min-time-between-zones-downscale="1d" is not a Go duration/);
      assert.match(
        f.fix,
        /annotate statefulset\/ingester-zone-a --overwrite grafana\.com\/min-time-between-zones-downscale=12h \(/,
      );
    });

    it('reports an annotation key set as a label, on StatefulSets and Deployments', () => {
      const input = withZone(
        clean(),
        'b',
        zone('b', { labels: { 'rollout-group': 'ingester', 'rollout-max-unavailable': '2' } }),
      );
      input.deployments = [
        operatorDeployment(),
        {
          ...distributor({}),
          metadata: { name: 'distributor', namespace: NS, labels: { 'com.xing.deployment-restart': 'enabled' } },
        },
      ];
      const findings = diagnose(input).filter((f) => f.code === 'key-should-be-annotation');
      assert.deepEqual(findings.map((f) => f.object).sort(), [
        'Deployment mimir/distributor',
        'StatefulSet mimir/ingester-zone-b',
      ]);
      const sts = findings.find((f) => f.object.startsWith('StatefulSet'))!;
      assert.equal(sts.severity, 'error');
      assert.match(
        sts.fix,
        /kubectl -n mimir annotate statefulset\/ingester-zone-b rollout-max-unavailable=2 && kubectl -n mimir label statefulset\/ingester-zone-b rollout-max-unavailable-/,
      );
    });

    it('reports keys on the pod template that are read only from the workload', () => {
      const input = clean();
      input.deployments = [
        operatorDeployment(),
        {
          ...distributor({}),
          spec: {
            ...distributor().spec!,
            template: {
              ...distributor().spec!.template,
              metadata: { labels: { name: 'distributor' }, annotations: { 'com.xing.deployment-restart': 'enabled' } },
            },
          },
        },
      ];
      const f = only(diagnose(input), 'key-on-pod-template');
      assert.equal(f.severity, 'error');
      assert.equal(f.object, 'Deployment mimir/distributor');
      assert.match(f.fix, /kubectl -n mimir annotate deployment\/distributor com\.xing\.deployment-restart=enabled/);
    });
  });

  it('reports every StatefulSet that blocks its rollout group for not being OnDelete', () => {
    const input = withZone(clean(), 'b', zone('b', { strategy: 'RollingUpdate' }));
    const f = only(diagnose(input), 'group-not-ondelete');
    assert.equal(f.severity, 'error');
    assert.equal(f.object, 'StatefulSet mimir/ingester-zone-b');
    assert.match(f.problem, /RollingUpdate.*rollout group "ingester".*blocked/);
    assert.match(
      f.fix,
      /kubectl -n mimir patch statefulset\/ingester-zone-b --type=merge -p '\{"spec":\{"updateStrategy":\{"type":"OnDelete","rollingUpdate":null\}\}\}'/,
    );
  });

  describe('leaders', () => {
    it('reports a leader that does not exist', () => {
      const input = withZone(
        clean(),
        'b',
        zone('b', { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-x' } }),
      );
      const f = only(diagnose(input), 'leader-not-found');
      assert.equal(f.severity, 'error');
      assert.equal(f.object, 'StatefulSet mimir/ingester-zone-b');
      assert.match(f.problem, /no such StatefulSet in namespace mimir/);
      assert.match(f.fix, /ingester-zone-a, ingester-zone-c/);
    });

    it("reports a leader outside the follower's group, with the label that fixes it", () => {
      const input = clean();
      input.statefulSets = [
        zone('a', { labels: { 'rollout-group': 'other' } }),
        zone('b', { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-a' } }),
        zone('c'),
      ];
      const f = only(diagnose(input), 'leader-not-found');
      assert.match(f.problem, /exists but is in rollout group "other"/);
      assert.match(f.fix, /kubectl -n mimir label statefulset\/ingester-zone-a --overwrite rollout-group=ingester/);
    });

    it('reports a leader cycle once for the group', () => {
      const input = clean();
      input.statefulSets = [
        zone('a', { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-b' } }),
        zone('b', { annotations: { 'grafana.com/rollout-downscale-leader': 'ingester-zone-a' } }),
        zone('c'),
      ];
      const f = only(diagnose(input), 'leader-cycle');
      assert.equal(f.severity, 'error');
      assert.equal(f.object, 'StatefulSet mimir/ingester-zone-a');
      assert.match(f.problem, /cycle: ingester-zone-a -> ingester-zone-b -> ingester-zone-a/);
      assert.match(f.fix, /annotate statefulset\/<leader> grafana\.com\/rollout-downscale-leader-/);
    });
  });

  describe('values that do not parse', () => {
    const cases: {
      name: string;
      labels?: Record<string, string>;
      annotations: Record<string, string>;
      code: string;
      severity: Finding['severity'];
      problem: RegExp;
      fix: RegExp;
    }[] = [
      {
        name: 'a min-time label that is no Go duration',
        labels: { 'rollout-group': 'ingester', 'grafana.com/min-time-between-zones-downscale': '12x' },
        annotations: {},
        code: 'invalid-min-time',
        severity: 'error',
        problem: /not a Go duration/,
        fix: /annotate statefulset\/ingester-zone-a --overwrite grafana\.com\/min-time-between-zones-downscale=12h && kubectl -n mimir label statefulset\/ingester-zone-a grafana\.com\/min-time-between-zones-downscale-/,
      },
      {
        name: 'a "True" that counts as false',
        labels: { 'rollout-group': 'ingester', 'grafana.com/no-downscale': 'True' },
        annotations: {},
        code: 'not-exactly-true',
        severity: 'error',
        problem: /treated as false/,
        fix: /label statefulset\/ingester-zone-a --overwrite grafana\.com\/no-downscale=true/,
      },
      {
        name: 'an unparsable last-downscale',
        annotations: { 'grafana.com/last-downscale': 'yesterday' },
        code: 'invalid-last-downscale',
        severity: 'error',
        problem: /does not parse/,
        fix: /annotate statefulset\/ingester-zone-a grafana\.com\/last-downscale-/,
      },
      {
        name: 'a mirror without its kind',
        annotations: { 'grafana.com/rollout-mirror-replicas-from-resource-name': 'ingester' },
        code: 'incomplete-mirror',
        severity: 'error',
        problem: /no grafana\.com\/rollout-mirror-replicas-from-resource-kind/,
        fix: /rollout-mirror-replicas-from-resource-kind=ReplicaTemplate/,
      },
      {
        name: 'a write-back that is no boolean',
        annotations: {
          'grafana.com/rollout-mirror-replicas-from-resource-name': 'ingester',
          'grafana.com/rollout-mirror-replicas-from-resource-kind': 'ReplicaTemplate',
          'grafana.com/rollout-mirror-replicas-from-resource-api-version': 'rollout-operator.grafana.com/v1',
          'grafana.com/rollout-mirror-replicas-from-resource-write-back': 'nope',
        },
        code: 'invalid-mirror-write-back',
        severity: 'warning',
        problem: /not a boolean/,
        fix: /write-back=false/,
      },
      {
        name: 'a negative force-replicas',
        annotations: { 'grafana.com/rollout-force-replicas': '-1' },
        code: 'force-replicas-ignored',
        severity: 'warning',
        problem: /must not be negative/,
        fix: /annotate statefulset\/ingester-zone-a grafana\.com\/rollout-force-replicas-/,
      },
      {
        name: 'force-replicas on a StatefulSet that neither follows nor mirrors',
        annotations: { 'grafana.com/rollout-force-replicas': '3' },
        code: 'force-replicas-ignored',
        severity: 'warning',
        problem: /has no effect/,
        fix: /follower/,
      },
      {
        name: 'a delayed downscale that is no Prometheus duration',
        annotations: {
          'grafana.com/rollout-delayed-downscale': '4 hours',
          'grafana.com/rollout-prepare-delayed-downscale-url': 'http://pod:8080/prepare',
        },
        code: 'invalid-delayed-downscale',
        severity: 'error',
        problem: /failed to parse grafana\.com\/rollout-delayed-downscale/,
        fix: /Prometheus duration/,
      },
      {
        name: 'a delayed downscale without its URL',
        annotations: { 'grafana.com/rollout-delayed-downscale': '4h' },
        code: 'invalid-delayed-downscale',
        severity: 'error',
        problem: /without grafana\.com\/rollout-prepare-delayed-downscale-url/,
        fix: /set both/,
      },
      {
        name: 'a rollout-max-unavailable of 0',
        annotations: { 'rollout-max-unavailable': '0' },
        code: 'invalid-max-unavailable',
        severity: 'warning',
        problem: /must be greater than 0; using 1/,
        fix: /annotate statefulset\/ingester-zone-a --overwrite rollout-max-unavailable=2/,
      },
      {
        name: 'a rollout-max-unavailable of 150%',
        annotations: { 'rollout-max-unavailable': '150%' },
        code: 'invalid-max-unavailable',
        severity: 'warning',
        problem: /1% to 100%/,
        fix: /25%/,
      },
      {
        name: 'a last-downscale in the future',
        annotations: { 'grafana.com/last-downscale': '2026-11-23T12:00:00Z' },
        code: 'last-downscale-in-future',
        severity: 'warning',
        problem: /in the future/,
        fix: /check the clocks/,
      },
    ];
    for (const c of cases) {
      it(`reports ${c.name}`, () => {
        const input = withZone(
          clean(),
          'a',
          zone('a', { ...(c.labels ? { labels: c.labels } : {}), annotations: c.annotations }),
        );
        const findings = diagnose(input);
        const f = only(findings, c.code);
        assert.equal(f.severity, c.severity);
        assert.equal(f.object, 'StatefulSet mimir/ingester-zone-a');
        assert.match(f.problem, c.problem);
        assert.match(f.fix, c.fix);
        assert.deepEqual(codes(findings), [c.code], 'nothing else');
      });
    }

    it('reports a prepare-downscale label without the pod endpoint', () => {
      const input = withZone(
        clean(),
        'a',
        zone('a', {
          labels: { 'rollout-group': 'ingester', 'grafana.com/prepare-downscale': 'true' },
          annotations: { 'grafana.com/prepare-downscale-http-port': '80' },
        }),
      );
      const f = only(diagnose(input), 'prepare-downscale-incomplete');
      assert.equal(f.severity, 'error');
      assert.match(
        f.problem,
        /no annotation grafana\.com\/prepare-downscale-http-path: the prepare-downscale webhook denies every downscale/,
      );
      assert.match(
        f.fix,
        /annotate statefulset\/ingester-zone-a grafana\.com\/prepare-downscale-http-path=ingester\/prepare-shutdown$/,
      );
    });
  });

  describe('webhook configurations', () => {
    const noDownscale = (input: DoctorInput) =>
      input.validatingWebhookConfigurations.find((c) => c.metadata?.name === `no-downscale-${NS}`)!;
    const podEviction = (input: DoctorInput) =>
      input.validatingWebhookConfigurations.find((c) => c.metadata?.name === `pod-eviction-${NS}`)!;
    const zpdbValidation = (input: DoctorInput) =>
      input.validatingWebhookConfigurations.find((c) => c.metadata?.name === `zpdb-validation-${NS}`)!;

    it('reports missing CA-injection labels and the empty caBundle that follows', () => {
      const input = clean();
      const config = noDownscale(input);
      config.metadata!.labels = { 'grafana.com/namespace': NS };
      delete config.webhooks![0]!.clientConfig!.caBundle;
      const findings = diagnose(input);
      const labels = only(findings, 'webhook-ca-labels-missing');
      assert.equal(labels.severity, 'error');
      assert.equal(labels.object, `ValidatingWebhookConfiguration no-downscale-${NS}`);
      assert.match(labels.problem, /lacks the label grafana\.com\/inject-rollout-operator-ca=true/);
      assert.equal(
        labels.fix,
        `kubectl label validatingwebhookconfiguration/no-downscale-${NS} grafana.com/inject-rollout-operator-ca=true --overwrite`,
      );
      const bundle = only(findings, 'webhook-ca-bundle-empty');
      assert.equal(bundle.severity, 'error');
      assert.match(bundle.problem, /no-downscale-mimir\.grafana\.com has no clientConfig\.caBundle/);
    });

    it('explains an empty caBundle on a labelled configuration by the operator flags', () => {
      const input = clean();
      delete zpdbValidation(input).webhooks![0]!.clientConfig!.caBundle;
      const f = only(diagnose(input), 'webhook-ca-bundle-empty');
      assert.match(f.problem, /zpdb-validation-mimir\.grafana\.com has no clientConfig\.caBundle/);
      assert.match(f.fix, /-server-tls\.enabled.*-webhooks\.update-ca-bundle=true/);
    });

    it('reports a grafana.com/namespace label naming another namespace than the Service', () => {
      const input = clean();
      podEviction(input).metadata!.labels!['grafana.com/namespace'] = 'elsewhere';
      const f = only(diagnose(input), 'webhook-namespace-mismatch');
      assert.equal(f.severity, 'error');
      assert.match(
        f.fix,
        /kubectl label validatingwebhookconfiguration\/pod-eviction-mimir grafana\.com\/namespace=mimir --overwrite/,
      );
    });

    it('reports failurePolicy Ignore on pod-eviction (error) and zpdb-validation (warning), with why', () => {
      const input = clean();
      podEviction(input).webhooks![0]!.failurePolicy = 'Ignore';
      zpdbValidation(input).webhooks![0]!.failurePolicy = 'Ignore';
      const findings = diagnose(input).filter((f) => f.code === 'webhook-failure-policy-ignore');
      assert.deepEqual(
        findings.map((f) => f.severity),
        ['error', 'warning'],
      );
      assert.match(
        findings[0]!.problem,
        /pod-eviction-mimir\.grafana\.com \(pod-eviction\) has failurePolicy Ignore: .*two zones down/,
      );
      assert.match(
        findings[0]!.fix,
        /--type=json -p '\[\{"op":"replace","path":"\/webhooks\/0\/failurePolicy","value":"Fail"\}\]'/,
      );
      assert.match(findings[1]!.problem, /zpdb-validation.*silently ignored/);
    });

    it('reports failurePolicy Ignore on prepare-downscale', () => {
      const input = clean();
      input.mutatingWebhookConfigurations[0]!.webhooks![0]!.failurePolicy = 'Ignore';
      const f = only(diagnose(input), 'webhook-failure-policy-ignore');
      assert.equal(f.severity, 'error');
      assert.equal(f.object, `MutatingWebhookConfiguration prepare-downscale-${NS}`);
      assert.match(f.problem, /without their leaving pods being prepared/);
    });

    it("reports a no-downscale webhook whose objectSelector does not exclude the operator's Deployment", () => {
      const input = clean();
      delete noDownscale(input).webhooks![0]!.objectSelector;
      const f = only(diagnose(input), 'no-downscale-selects-operator');
      assert.equal(f.severity, 'error');
      assert.match(
        f.problem,
        /has no objectSelector, so it covers the operator's own Deployment mimir\/rollout-operator/,
      );
      assert.match(f.fix, /"op":"add","path":"\/webhooks\/0\/objectSelector".*NotIn/);
      // The API server stores an absent objectSelector as {}.
      noDownscale(input).webhooks![0]!.objectSelector = {};
      assert.match(only(diagnose(input), 'no-downscale-selects-operator').problem, /has no objectSelector/);
      // Without the Deployment in view, judged by the labels the operator ships with.
      assert.equal(
        only(diagnose({ ...input, deployments: [distributor()] }), 'no-downscale-selects-operator').severity,
        'error',
      );
      // With failurePolicy Ignore nothing is held up.
      noDownscale(input).webhooks![0]!.failurePolicy = 'Ignore';
      assert.deepEqual(codes(diagnose(input)), []);
    });

    it('checks only configurations that concern the diagnosed namespaces', () => {
      const input = clean();
      podEviction(input).webhooks![0]!.failurePolicy = 'Ignore';
      assert.deepEqual(codes(diagnose({ ...input, namespaces: ['other'] })), []);
      assert.deepEqual(codes(diagnose({ ...input, namespaces: undefined })), ['webhook-failure-policy-ignore']);
    });
  });

  describe('zone-aware pod disruption budgets', () => {
    it('reports a budget the operator cannot parse', () => {
      const input = clean();
      input.zpdbs = [
        zpdb('ingester', {
          maxUnavailable: 1,
          maxUnavailablePercentage: 10,
          selector: { matchLabels: { 'rollout-group': 'ingester' } },
        }),
      ];
      const f = only(diagnose(input), 'zpdb-invalid');
      assert.equal(f.severity, 'error');
      assert.equal(f.object, 'ZoneAwarePodDisruptionBudget mimir/ingester');
      assert.match(f.problem, /only one of maxUnavailable or maxUnavailablePercentage may be set/);
      assert.match(f.fix, /kubectl -n mimir edit zpdb\/ingester/);
    });

    it('reports an unknown unhealthyPodEvictionPolicy, naming the two it may be', () => {
      const input = clean();
      input.zpdbs = [
        zpdb('ingester', {
          selector: { matchLabels: { 'rollout-group': 'ingester' } },
          unhealthyPodEvictionPolicy: 'Always',
        }),
      ];
      const f = only(diagnose(input), 'zpdb-invalid');
      assert.match(
        f.problem,
        /^invalid value: unhealthyPodEvictionPolicy must be IfHealthyBudget or AlwaysAllow, got "Always"; the operator denies every eviction/,
      );
      assert.match(f.fix, /unhealthyPodEvictionPolicy IfHealthyBudget or AlwaysAllow/);
    });

    it('reports a selector matching no StatefulSet: a warning with no pods, an error with pods', () => {
      const input = clean();
      input.zpdbs.push(zpdb('typo', { selector: { matchLabels: { 'rollout-group': 'ingestr' } } }));
      const f = only(diagnose(input), 'zpdb-no-statefulsets');
      assert.equal(f.severity, 'warning');
      assert.equal(f.object, 'ZoneAwarePodDisruptionBudget mimir/typo');
      assert.match(f.problem, /rollout-group=ingestr matches no StatefulSet in mimir and no pod/);

      const podsOnly = clean();
      podsOnly.zpdbs = [zpdb('ingester', { selector: { matchLabels: { name: 'ingester-zone-a' } } })];
      const g = only(diagnose(podsOnly), 'zpdb-no-statefulsets');
      assert.equal(g.severity, 'error');
      assert.match(g.problem, /only 2 pods/);
      assert.match(g.fix, /label each zone's StatefulSet itself/);
    });

    it('reports a budget over a single StatefulSet', () => {
      const input = clean();
      input.statefulSets = [zone('a'), zone('b', { labels: { 'rollout-group': 'other' } })];
      input.pods = input.statefulSets.flatMap((s) => podsOf(s));
      const f = only(diagnose(input), 'zpdb-single-statefulset');
      assert.equal(f.severity, 'error');
      assert.match(f.problem, /matches only StatefulSet ingester-zone-a/);
    });

    it('reports two budgets over the same pods', () => {
      const input = clean();
      input.zpdbs.push(zpdb('zone-a', { selector: { matchLabels: { name: 'ingester-zone-a' } } }));
      const findings = diagnose(input);
      const f = only(findings, 'zpdb-overlap');
      assert.equal(f.severity, 'error');
      assert.match(f.problem, /budgets ingester, zone-a select the same 2 pods/);
      assert.ok(codes(findings).includes('zpdb-no-statefulsets'), 'zone-a also selects no StatefulSet');
    });
  });

  describe('config restarts', () => {
    it('reports a referenced ConfigMap that does not exist, not an optional one', () => {
      const input = { ...clean(), configMaps: [] };
      const f = only(diagnose(input), 'config-missing');
      assert.equal(f.severity, 'error');
      assert.equal(f.object, 'Deployment mimir/distributor');
      assert.match(
        f.problem,
        /opted in to config restarts \(xing\) and its pods need ConfigMap runtime-config, which does not exist/,
      );
      assert.match(f.fix, /create ConfigMap mimir\/runtime-config/);
      assert.deepEqual(
        codes(diagnose({ ...input, deployments: [operatorDeployment(), distributor(undefined, true)] })),
        [],
      );
    });

    it('does not call a Secret missing when Secrets could not be listed', () => {
      const input = { ...clean(), secrets: [], unreadable: ['secrets'] };
      assert.deepEqual(codes(diagnose(input)), ['checks-skipped']);
      assert.deepEqual(codes(diagnose({ ...input, unreadable: [] })), ['config-missing']);
    });

    it('reports an opt-in annotation with a value that does not opt in', () => {
      const input = clean();
      input.deployments = [operatorDeployment(), distributor({ 'com.xing.deployment-restart': 'enable' })];
      const f = only(diagnose(input), 'config-restart-annotation');
      assert.equal(f.severity, 'warning');
      assert.match(f.problem, /com\.xing\.deployment-restart="enable" is not "enabled"; not opted in/);
      assert.match(f.fix, /com\.xing\.deployment-restart: enabled/);
    });

    it('reports a reload-list name that does not exist as a warning', () => {
      const input = clean();
      input.deployments = [
        operatorDeployment(),
        distributor({ 'configmap.reloader.stakater.com/reload': 'runtime-config,limits' }),
      ];
      const f = only(diagnose(input), 'config-missing');
      assert.equal(f.severity, 'warning');
      assert.match(f.problem, /reload list names ConfigMap limits/);
    });
  });

  it('reports an OnDelete StatefulSet that nothing rolls, with its outdated pods', () => {
    const input = clean();
    const standalone: StatefulSet = {
      ...zone('x', { labels: {}, templateLabels: { name: 'ingester-zone-x' } }),
      status: { replicas: 2, currentRevision: 'r1', updateRevision: 'r2' },
    };
    input.statefulSets.push(standalone);
    input.pods.push(...podsOf(standalone, 'r1'));
    const f = only(diagnose(input), 'ondelete-unmanaged');
    assert.equal(f.severity, 'warning');
    assert.equal(f.object, 'StatefulSet mimir/ingester-zone-x');
    assert.match(f.problem, /OnDelete with 2 pods but in no rollout group.*2 pods already run an old revision/);
    assert.match(
      f.fix,
      /label statefulset\/ingester-zone-x rollout-group=ingester-zone-x.*stateward\.dev\/config-restart-ondelete=evict/,
    );
    standalone.metadata!.annotations = { 'stateward.dev/config-restart-ondelete': 'evict' };
    assert.deepEqual(codes(diagnose(input)), []);
  });

  it('reports an operator Deployment without the flags its configured features need', () => {
    const input = { ...clean(), deployments: [operatorDeployment(['-kubernetes.namespace=mimir']), distributor()] };
    const findings = diagnose(input).filter((f) => f.code === 'operator-flag-missing');
    assert.equal(findings.length, 2);
    assert.ok(findings.every((f) => f.object === 'Deployment mimir/rollout-operator' && f.severity === 'warning'));
    assert.ok(findings.some((f) => /without -server-tls\.enabled/.test(f.problem)));
    assert.ok(
      findings.some(
        (f) =>
          /1 workload \(Deployment mimir\/distributor\) opted in to config-change restarts/.test(f.problem) &&
          /-config-restarts\.enabled/.test(f.fix),
      ),
    );
  });

  it('says which checks were skipped for resources it may not list', () => {
    const input = {
      ...clean(),
      validatingWebhookConfigurations: [],
      mutatingWebhookConfigurations: [],
      unreadable: ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations'],
    };
    const findings = diagnose(input);
    assert.deepEqual(codes(findings), ['checks-skipped', 'checks-skipped']);
    assert.ok(findings.every((f) => f.severity === 'warning'));
    assert.match(
      findings[1]!.problem,
      /cannot list validatingwebhookconfigurations \(forbidden\): webhook checks .* were skipped/,
    );
    assert.match(findings[1]!.fix, /kubectl auth can-i list validatingwebhookconfigurations/);
  });

  it('sorts errors first and quotes shell words that need it', () => {
    const input = withZone(
      clean(),
      'a',
      zone('a', { strategy: 'RollingUpdate', annotations: { 'rollout-max-unavailable': 'x' } }),
    );
    assert.deepEqual(codes(diagnose(input)), ['group-not-ondelete', 'invalid-max-unavailable']);
    assert.equal(shellQuote('a b'), "'a b'");
    assert.equal(shellQuote("it's"), `'it'\\''s'`);
    assert.equal(shellQuote('rollout-group=ingester'), 'rollout-group=ingester');
  });

  it('an operator Deployment with no available replica, or scaled to 0, is an error: nothing answers', () => {
    const down = operatorDeployment();
    down.status = { replicas: 1, unavailableReplicas: 1 };
    const unavailable = only(diagnose({ ...clean(), deployments: [down, distributor()] }), 'operator-unavailable');
    assert.equal(unavailable.severity, 'error');
    assert.equal(unavailable.object, `Deployment ${NS}/rollout-operator`);
    assert.match(unavailable.problem, /none of its 1 replicas is available/);
    assert.match(unavailable.fix, /kubectl -n mimir logs deployment\/rollout-operator/);
    const scaledDown = operatorDeployment();
    scaledDown.spec = { ...scaledDown.spec!, replicas: 0 };
    scaledDown.status = {};
    const zero = only(diagnose({ ...clean(), deployments: [scaledDown, distributor()] }), 'operator-unavailable');
    assert.match(zero.problem, /scaled to 0 replicas/);
    assert.match(zero.fix, /--replicas=1/);
  });

  it("a webhook configuration calling a Service that does not exist is an error; one that exists or can't be read is not judged", () => {
    const services = (exists: boolean | undefined) => ({
      ...clean(),
      webhookServices: { [`${NS}/rollout-operator`]: exists },
    });
    assert.deepEqual(codes(diagnose(services(true))), []);
    assert.deepEqual(codes(diagnose(services(undefined))), [], 'unreadable: not judged');
    const missing = diagnose(services(false)).filter((f) => f.code === 'webhook-service-missing');
    assert.ok(missing.length >= 2, JSON.stringify(missing, null, 2));
    for (const f of missing) {
      assert.equal(f.severity, 'error');
      assert.match(f.problem, new RegExp(`calls Service ${NS}/rollout-operator, which does not exist`));
    }
    assert.ok(missing.some((f) => /refuse every request they cover \(failurePolicy Fail\)/.test(f.problem)));
  });

  it('a webhook Service with no ready endpoint is an error; endpoints unknown or ready are not judged', () => {
    const key = `${NS}/rollout-operator`;
    const input = (ready: number | undefined) => ({
      ...clean(),
      webhookServices: { [key]: true },
      webhookEndpoints: { [key]: ready },
    });
    assert.deepEqual(codes(diagnose(input(1))), []);
    assert.deepEqual(codes(diagnose(input(undefined))), [], 'EndpointSlices unreadable: not judged');
    const empty = diagnose(input(0)).filter((f) => f.code === 'webhook-service-no-endpoints');
    assert.ok(empty.length >= 2, JSON.stringify(empty, null, 2));
    for (const f of empty) {
      assert.equal(f.severity, 'error');
      assert.match(f.problem, new RegExp(`calls Service ${key}, which has no ready endpoint`));
      assert.match(f.fix, /kubectl -n mimir get endpointslices -l kubernetes\.io\/service-name=rollout-operator/);
    }
  });

  it('with leader election, a leader Lease nobody renews is an error, a missing one a warning', () => {
    const leading = operatorDeployment([
      '-kubernetes.namespace=$(POD_NAMESPACE)',
      '-server-tls.enabled=true',
      '-config-restarts.enabled',
      '-leader-election.enabled',
    ]);
    const key = `${NS}/rollout-operator`;
    const withLease = (lease: unknown) => ({
      ...clean(),
      deployments: [leading, distributor()],
      operatorLeases: { [key]: lease } as DoctorInput['operatorLeases'],
    });
    const lease = (renewedAgoMs: number | undefined) => ({
      namespace: NS,
      name: 'stateward-leader',
      holder: 'rollout-operator-abc',
      renewedAt: renewedAgoMs === undefined ? undefined : NOW - renewedAgoMs,
      durationSeconds: 15,
    });
    assert.deepEqual(codes(diagnose(withLease(lease(5_000)))), [], 'renewed 5 s ago');
    assert.deepEqual(codes(diagnose(withLease(lease(29_000)))), [], 'within two lease durations: a handover');
    assert.deepEqual(codes(diagnose(withLease(undefined))), [], 'unreadable: not judged');
    const stale = only(diagnose(withLease(lease(600_000))), 'operator-not-leading');
    assert.equal(stale.severity, 'error');
    assert.match(
      stale.problem,
      /leader Lease mimir\/stateward-leader was last renewed 600 s ago by rollout-operator-abc/,
    );
    const never = only(diagnose(withLease(lease(undefined))), 'operator-not-leading');
    assert.match(never.problem, /was never renewed/);
    const missing = only(diagnose(withLease(null)), 'operator-not-leading');
    assert.equal(missing.severity, 'warning');
    assert.match(missing.problem, /does not exist: no replica has led yet/);
    // Without -leader-election.enabled there is no Lease to look at.
    assert.deepEqual(codes(diagnose({ ...clean(), operatorLeases: { [key]: null } })), []);
  });
});
