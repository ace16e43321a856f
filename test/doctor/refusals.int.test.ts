// The doctor sees the operator's requests being refused (issue 39: it said
// "No problems found" beside an operator logging a 403 every second): the
// real operator runs under Stateward's own Role for rollouts minus the one
// rule on ConfigMaps, its first reconcile's status write is refused, and the
// doctor reads the operator's count of refusals from its /metrics and names
// the rule to add.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runDoctor } from '../../src/doctor/cli.ts';
import type { Finding } from '../../src/doctor/checks/scope.ts';
import { refusedRequests } from '../../src/doctor/checks/operatorrefusals.ts';
import { policyRules } from '../../src/rbac/permissions.ts';
import { waitFor } from '../cluster/probe.ts';
import { testCluster } from '../cluster/testing.ts';
import { OperatorProcess } from '../support/operator-process.ts';
import { serviceAccountUnderRole } from '../support/service-account.ts';
import { createGroup, testClient, waitGroupSettled } from '../support/rollout-group.ts';

const cluster = testCluster();

describe('doctor and the operator’s refused requests', { timeout: 180_000 }, () => {
  it('names the permission an operator under a Role missing one rule is refused', async (t) => {
    const namespace = await cluster.namespace(t, 'doctor-refused');
    const kube = testClient(cluster);
    t.after(() => kube.close());
    // Stateward's rules for rollouts in its namespace, but the one on ConfigMaps (its rollout status).
    const rules = policyRules(['rollouts'], ['managed', 'own']);
    const missing = rules.filter((r) => r.resources.includes('configmaps'));
    assert.ok(missing.length > 0, 'the rollouts feature has a ConfigMap rule to leave out');
    const kubeconfig = await serviceAccountUnderRole(
      cluster,
      kube,
      namespace,
      'stateward',
      rules.filter((r) => !missing.includes(r)),
    );
    await createGroup(kube, namespace);
    await waitGroupSettled(kube, namespace);

    const op = await OperatorProcess.start(cluster, namespace, [], { kubeconfig });
    t.after(() => op.stop());
    await op.waitReady();
    const metricsUrl = `http://127.0.0.1:${op.port}/metrics`;
    // The group's first reconcile writes its status: refused.
    const refused = await waitFor(
      'a refused ConfigMap request in the operator’s metrics',
      async () => {
        const found = refusedRequests((await op.get('/metrics'))?.body ?? '');
        return found.some((r) => r.resource === 'configmaps') ? found : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    t.diagnostic(`refused: ${JSON.stringify(refused)}`);

    let out = '';
    let err = '';
    const code = await runDoctor(
      ['-n', namespace, '-o', 'json', '-operator-metrics-url', metricsUrl, '--kubeconfig', cluster.kubeconfigPath],
      { out: (s) => (out += s), err: (s) => (err += s), env: {} },
    );
    assert.equal(err, '');
    const findings = (JSON.parse(out) as { findings: Finding[] }).findings;
    const about = findings.filter((f) => f.code === 'operator-requests-refused');
    t.diagnostic(about.map((f) => `${f.severity} ${f.object}: ${f.problem}\n  fix: ${f.fix}`).join('\n'));
    const configMaps = about.filter((f) =>
      /^\w+ configmaps in namespace /.test(f.problem.split('requests to ')[1] ?? ''),
    );
    assert.ok(
      configMaps.some((f) => /requests to patch configmaps/.test(f.problem)),
      `the first refused write, a rule left out, is named: ${JSON.stringify(findings, undefined, 2)}`,
    );
    assert.ok(missing.some((r) => r.verbs.includes('patch')));
    for (const f of configMaps) {
      const verb = /requests to (\w+) configmaps/.exec(f.problem)?.[1];
      // The status write: a patch, then (refused) the read and update it falls back to, or a create.
      assert.ok(verb && ['patch', 'get', 'update', 'create'].includes(verb), `${verb}: not a status write`);
      assert.equal(f.object, `the operator's metrics at ${metricsUrl}`);
      assert.match(f.problem, new RegExp(`in namespace ${namespace} \\d+ times? since it started`));
      assert.match(f.problem, /it uses this to /, 'what Stateward needs it for');
      assert.ok(
        f.fix.includes(
          `add the rule {apiGroups: [""], resources: ["configmaps"], verbs: ["${verb}"]} to a Role in namespace ${namespace}`,
        ),
        f.fix,
      );
      assert.ok(f.fix.includes(`kubectl auth can-i ${verb} configmaps -n ${namespace}`), f.fix);
    }
    // One finding per refused rule, no more: each refusal counted before the doctor ran is named, and
    // nothing is named that the operator had not counted by the time it finished.
    const named = (list: { verb: string; resource: string }[]) => list.map((r) => `${r.verb} ${r.resource}`).sort();
    const after = refusedRequests((await op.get('/metrics'))?.body ?? '');
    const inFindings = about.map((f) => /requests to (\S+ \S+)/.exec(f.problem)?.[1] ?? f.problem).sort();
    for (const rule of named(refused))
      assert.ok(inFindings.includes(rule), `${rule} not named: ${inFindings.join(', ')}`);
    for (const rule of inFindings) assert.ok(named(after).includes(rule), `${rule} named but not refused`);
    assert.equal(
      code,
      about.some((f) => f.severity === 'error') || findings.some((f) => f.severity === 'error') ? 1 : 0,
    );
  });
});
