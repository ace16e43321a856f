// The per-(workload, class) checksum of csichecksum.ts against a model of
// what moves a SecretProviderClassPodStatus: the secrets store rotating, the
// CSI driver rewriting running pods' statuses one at a time, workload
// controllers rolling pods (new pods mount what the store serves now, old
// ones go), scaling, and an operator that is down for a while and rebuilt
// from the cluster alone. Decisions go through the real decideRestart. The
// claims: spaced rotations restart each workload exactly once each; any
// interleaving restarts at least once and at most once per rotation, and
// ends with the record at the store's versions.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { classChecksum, versionsChecksum, type ClassMount } from '../../src/restarts/csichecksum.ts';
import { decideRestart } from '../../src/restarts/restartplan.ts';

const KEY = 'secretproviderclass/prod/vault-db';
const HMAC_KEY = Buffer.from('model-key');
const WORKLOADS = ['a', 'b'] as const;
type Name = (typeof WORKLOADS)[number];

const hashes = new Map<number, string>();
const checksumOf = (version: number): string => {
  let h = hashes.get(version);
  if (h === undefined) hashes.set(version, (h = versionsChecksum(HMAC_KEY, [{ id: 'db', version: `v${version}` }])));
  return h;
};

interface SimPod {
  workload: Name;
  /** The restart trigger the pod was created with. */
  stamp: number;
  terminating: boolean;
  /** Its SPCPS: the versions last written and that write's resourceVersion; undefined until mounted. */
  mount?: { version: number; rv: number };
}

interface SimWorkload {
  stamp: number;
  /** The applied record (the annotation): all the operator remembers. */
  applied: Map<string, string>;
  restarts: number;
}

type Step =
  | { op: 'rotate' }
  | { op: 'driver'; pick: number }
  | { op: 'mount'; pick: number }
  | { op: 'rollout'; w: Name }
  | { op: 'delete'; pick: number }
  | { op: 'scale'; w: Name; up: boolean }
  | { op: 'decide'; w: Name }
  | { op: 'operator'; up: boolean };

class Cluster {
  store = 0;
  rotations = 0;
  private rv = 100;
  pods: SimPod[] = [];
  readonly workloads = new Map<Name, SimWorkload>(
    WORKLOADS.map((w) => [w, { stamp: 0, applied: new Map(), restarts: 0 }]),
  );
  private operatorUp = true;

  constructor(replicas: Record<Name, number>) {
    for (const w of WORKLOADS)
      for (let i = 0; i < replicas[w]; i++) this.pods.push({ workload: w, stamp: 0, terminating: false });
  }

  private live = (p: SimPod) => !this.pods.includes(p) || !p.terminating;
  private pick<T>(list: T[], n: number): T | undefined {
    return list.length === 0 ? undefined : list[n % list.length];
  }

  apply(step: Step): void {
    switch (step.op) {
      case 'rotate':
        this.store++;
        this.rotations++;
        return;
      case 'driver': {
        // The driver rewrites a running pod's status only when the versions it mounted moved.
        const p = this.pick(
          this.pods.filter((q) => q.mount && q.mount.version !== this.store),
          step.pick,
        );
        if (p) p.mount = { version: this.store, rv: ++this.rv };
        return;
      }
      case 'mount': {
        const p = this.pick(
          this.pods.filter((q) => !q.mount),
          step.pick,
        );
        if (p) p.mount = { version: this.store, rv: ++this.rv };
        return;
      }
      case 'rollout':
        return this.rolloutOne(step.w);
      case 'delete': {
        const p = this.pick(
          this.pods.filter((q) => q.terminating),
          step.pick,
        );
        if (p) this.pods = this.pods.filter((q) => q !== p);
        return;
      }
      case 'scale':
        return this.scale(step.w, step.up);
      case 'decide':
        return this.decide(step.w);
      case 'operator':
        this.operatorUp = step.up;
        return;
    }
  }

  /** One pod of the old generation replaced: the new one created, the old one terminating. */
  private rolloutOne(name: Name): void {
    const w = this.workloads.get(name)!;
    const old = this.pods.find((p) => p.workload === name && p.stamp !== w.stamp && !p.terminating);
    if (!old) return;
    old.terminating = true;
    this.pods.push({ workload: name, stamp: w.stamp, terminating: false });
  }

  /** Never below one live pod: a workload with no pods has nothing to restart. */
  private scale(name: Name, up: boolean): void {
    const w = this.workloads.get(name)!;
    const live = this.pods.filter((p) => p.workload === name && !p.terminating);
    if (up) this.pods.push({ workload: name, stamp: w.stamp, terminating: false });
    else if (live.length > 1) live[0]!.terminating = true;
  }

  /** What the operator does for one workload: the checksum rule, then the real decision (no grace). */
  decide(name: Name): void {
    if (!this.operatorUp) return;
    const w = this.workloads.get(name)!;
    const mounts: ClassMount[] = this.pods
      .filter((p) => p.workload === name && p.mount)
      .map((p) => ({
        checksum: checksumOf(p.mount!.version),
        resourceVersion: String(p.mount!.rv),
        current: p.stamp === w.stamp,
        terminating: p.terminating,
      }));
    const decision = decideRestart({
      workload: { kind: 'Deployment', namespace: 'prod', name },
      optedIn: true,
      applied: w.applied,
      current: new Map([[KEY, classChecksum(mounts, w.applied.get(KEY))]]),
      now: 0,
      settings: { gracePeriodMs: 0, maxWaitMs: 0 },
    });
    if (decision.action === 'restart') {
      w.restarts++;
      w.stamp++;
    }
    if (decision.action === 'restart' || decision.action === 'update-annotation-only') w.applied = decision.applied;
  }

  /** Everything settles: the operator is up, every pod mounted and rotated, every rollout done, decisions made. */
  converge(): void {
    this.operatorUp = true;
    for (let round = 0; round < 20; round++) {
      const before = JSON.stringify([...this.workloads.values()].map((w) => [w.stamp, w.restarts]));
      for (const p of this.pods)
        if (!p.mount || p.mount.version !== this.store) p.mount = { version: this.store, rv: ++this.rv };
      for (const name of WORKLOADS) {
        const w = this.workloads.get(name)!;
        while (this.pods.some((p) => p.workload === name && p.stamp !== w.stamp && !p.terminating))
          this.rolloutOne(name);
      }
      for (const p of this.pods) if (!p.mount) p.mount = { version: this.store, rv: ++this.rv };
      this.pods = this.pods.filter((p) => !p.terminating);
      for (const name of WORKLOADS) this.decide(name);
      if (JSON.stringify([...this.workloads.values()].map((w) => [w.stamp, w.restarts])) === before) return;
    }
    assert.fail('the model did not settle');
  }

  restarts(name: Name): number {
    return this.workloads.get(name)!.restarts;
  }
}

const step = (withRotations: boolean): fc.Arbitrary<Step> =>
  fc.oneof(
    ...(withRotations ? [fc.constant<Step>({ op: 'rotate' })] : []),
    fc.nat(9).map((pick): Step => ({ op: 'driver', pick })),
    fc.nat(9).map((pick): Step => ({ op: 'mount', pick })),
    fc.constantFrom(...WORKLOADS).map((w): Step => ({ op: 'rollout', w })),
    fc.nat(9).map((pick): Step => ({ op: 'delete', pick })),
    fc.record({ w: fc.constantFrom(...WORKLOADS), up: fc.boolean() }).map((s): Step => ({ op: 'scale', ...s })),
    fc.constantFrom(...WORKLOADS).map((w): Step => ({ op: 'decide', w })),
    fc.boolean().map((up): Step => ({ op: 'operator', up })),
  );

const replicas = fc.record({ a: fc.integer({ min: 1, max: 4 }), b: fc.integer({ min: 1, max: 3 }) });

function started(r: Record<Name, number>): Cluster {
  const c = new Cluster(r);
  c.converge(); // opting in records the versions, restarts nothing
  for (const name of WORKLOADS) assert.equal(c.restarts(name), 0);
  return c;
}

describe('class checksum against the model: restarts per rotation', () => {
  it('a story: the first rewritten status restarts, the rest of the rotation, the new pods and the old pods’ going do not', () => {
    const c = started({ a: 3, b: 1 });
    c.apply({ op: 'rotate' });
    c.apply({ op: 'driver', pick: 0 }); // a's first pod rewritten
    c.decide('a');
    assert.equal(c.restarts('a'), 1);
    for (const s of [0, 0, 0] as const) c.apply({ op: 'driver', pick: s }); // the others, old generation now
    c.decide('a');
    for (let i = 0; i < 3; i++) {
      c.apply({ op: 'rollout', w: 'a' });
      c.apply({ op: 'mount', pick: 0 });
      c.decide('a');
      c.apply({ op: 'delete', pick: 0 });
      c.decide('a');
    }
    assert.equal(c.restarts('a'), 1);
    c.converge();
    assert.deepEqual([c.restarts('a'), c.restarts('b')], [1, 1]);
  });

  it('the rotated pod replaced first, an unrotated old pod still running: no second restart', () => {
    const c = started({ a: 2, b: 1 });
    c.apply({ op: 'rotate' });
    c.apply({ op: 'driver', pick: 0 }); // a's first pod
    c.decide('a');
    c.apply({ op: 'rollout', w: 'a' }); // that same pod goes first; the other still shows the old versions
    c.decide('a');
    c.apply({ op: 'delete', pick: 0 });
    c.decide('a');
    assert.equal(c.restarts('a'), 1);
    c.converge();
    assert.equal(c.restarts('a'), 1);
  });

  it('a rotation while the operator is down restarts once when it is back; one applied before is not repeated', () => {
    const c = started({ a: 2, b: 2 });
    c.apply({ op: 'operator', up: false });
    c.apply({ op: 'rotate' });
    for (let i = 0; i < 4; i++) c.apply({ op: 'driver', pick: i });
    for (const w of WORKLOADS) c.decide(w); // down: nothing
    assert.deepEqual([c.restarts('a'), c.restarts('b')], [0, 0]);
    c.apply({ op: 'operator', up: true }); // rebuilt from the cluster and the records alone
    c.decide('a');
    c.decide('a');
    assert.equal(c.restarts('a'), 1);
    c.converge();
    c.apply({ op: 'operator', up: false });
    c.apply({ op: 'operator', up: true });
    for (const w of WORKLOADS) c.decide(w);
    assert.deepEqual([c.restarts('a'), c.restarts('b')], [1, 1]);
  });

  it('spaced rotations: exactly one restart per rotation for each workload, whatever happens in between', () => {
    fc.assert(
      fc.property(
        replicas,
        fc.array(fc.array(step(false), { maxLength: 40 }), { minLength: 1, maxLength: 4 }),
        (r, phases) => {
          const c = started(r);
          for (const [i, steps] of phases.entries()) {
            c.apply({ op: 'rotate' });
            for (const s of steps) c.apply(s);
            c.converge();
            for (const name of WORKLOADS) assert.equal(c.restarts(name), i + 1, `${name} after rotation ${i + 1}`);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('overlapping rotations: at least one restart, at most one per rotation, and the record ends at the store’s versions', () => {
    fc.assert(
      fc.property(replicas, fc.array(step(true), { maxLength: 80 }), (r, steps) => {
        const c = started(r);
        for (const s of steps) c.apply(s);
        c.converge();
        for (const name of WORKLOADS) {
          const n = c.restarts(name);
          assert.ok(n <= c.rotations, `${name}: ${n} restarts for ${c.rotations} rotations`);
          if (c.rotations > 0) assert.ok(n >= 1, `${name}: no restart for ${c.rotations} rotations`);
          assert.equal(c.workloads.get(name)!.applied.get(KEY), checksumOf(c.store));
        }
      }),
      { numRuns: 2000 },
    );
  });
});
