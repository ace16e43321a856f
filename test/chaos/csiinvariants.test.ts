// The monitor's CSI rotation rule on hand-made watch sequences (through the
// InvariantChecker, as the monitor feeds it): one rotation and its one
// restart is quiet, whatever the other pods' rotations and the restart's new
// pods do; a lost, a doubled and a self-inflicted restart each fire; and the
// pairing itself, as a property.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import fc from 'fast-check';
import {
  CSI_AUTO_ANNOTATION,
  CSI_TRIGGER_ANNOTATION,
  judgeRotations,
  type ClassPodStatus,
  type Step,
} from './csiinvariants.ts';
import { InvariantChecker, type Watched, type WatchType } from './invariants.ts';

const NS = 'ns';
const CLASS = 'vault-db';

class Run {
  readonly checker = new InvariantChecker();
  private rv = 100;
  now = 1_000_000;

  private feed(event: Watched, type: WatchType = 'MODIFIED', relist = false): void {
    this.now += 100;
    this.checker.apply(event, type, this.now, relist);
  }

  deployment(
    trigger: string | undefined,
    o: { name?: string; optIn?: boolean; relist?: boolean; rv?: number } = {},
  ): void {
    const object: V1Deployment = {
      metadata: {
        name: o.name ?? 'web',
        namespace: NS,
        resourceVersion: String(o.rv ?? ++this.rv),
        annotations: o.optIn === false ? {} : { [CSI_AUTO_ANNOTATION]: 'true' },
      },
      spec: {
        selector: {},
        template: {
          metadata: { annotations: trigger ? { [CSI_TRIGGER_ANNOTATION]: trigger } : {} },
          spec: {
            containers: [],
            volumes: [
              {
                name: 'secrets',
                csi: { driver: 'secrets-store.csi.k8s.io', volumeAttributes: { secretProviderClass: CLASS } },
              },
            ],
          },
        },
      },
    };
    this.feed({ kind: 'Deployment', object }, 'MODIFIED', o.relist);
  }

  pod(name: string, hash: string, o: { deployment?: string } = {}): void {
    const object: V1Pod = {
      metadata: {
        name,
        namespace: NS,
        uid: `uid-${name}`,
        resourceVersion: String(++this.rv),
        labels: { 'pod-template-hash': hash },
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: `${o.deployment ?? 'web'}-${hash}`,
            uid: hash,
            controller: true,
          },
        ],
      },
    };
    this.feed({ kind: 'Pod', object }, 'ADDED');
  }

  /** The driver writing `pod`'s status with `version` for both objects; returns its resourceVersion. */
  status(pod: string, version: string, o: { relist?: boolean; rv?: number } = {}): number {
    const rv = o.rv ?? ++this.rv;
    const object: ClassPodStatus = {
      metadata: {
        name: `${pod}-${NS}-${CLASS}`,
        namespace: NS,
        resourceVersion: String(rv),
        ownerReferences: [{ kind: 'Pod', name: pod, uid: `uid-${pod}` }],
      },
      status: {
        podName: pod,
        secretProviderClassName: CLASS,
        objects: [
          { id: 'secret/db-password', version },
          { id: 'secret/api-key', version: '7' },
        ],
      },
    };
    this.feed({ kind: 'SecretProviderClassPodStatus', object }, 'MODIFIED', o.relist);
    return rv;
  }

  nextRv(): number {
    return ++this.rv;
  }

  finish(): { kinds: string[]; counters: Record<string, number> } {
    this.checker.finish(this.now + 60_000);
    return { kinds: this.checker.violations.map((v) => v.kind), counters: this.checker.counters };
  }
}

/** web with pods a and b mounted at version 1, seen from the start. */
function started(): Run {
  const run = new Run();
  run.deployment(undefined);
  run.pod('web-h1-a', 'h1');
  run.pod('web-h1-b', 'h1');
  run.status('web-h1-a', '1');
  run.status('web-h1-b', '1');
  return run;
}

/** The restart's rollout: new pods mounted with `version`, as the driver mounts what the store serves. */
function rollOut(run: Run, hash: string, version: string): void {
  for (const p of ['x', 'y']) {
    run.pod(`web-${hash}-${p}`, hash);
    run.status(`web-${hash}-${p}`, version);
  }
}

describe('CSI rotations: one restart each', () => {
  it('a rotation restarted once, the old pods rotated late and the new pods mounted: quiet', () => {
    const run = started();
    run.status('web-h1-a', '2');
    assert.equal(run.checker.pending().length, 1, 'the rotation waits for its restart');
    run.deployment('t1');
    assert.deepEqual(run.checker.pending(), []);
    run.status('web-h1-b', '2'); // the driver reaches the other old pod after the restart
    rollOut(run, 'h2', '2');
    // A second rotation, restarted too.
    run.status('web-h2-x', '3');
    run.deployment('t2');
    rollOut(run, 'h3', '3');
    const { kinds, counters } = run.finish();
    assert.deepEqual(kinds, []);
    assert.equal(counters['csiRotations'], 2);
    assert.equal(counters['csiRestarts'], 2);
    assert.equal(counters['csiRotationsRestarted'], 2);
  });

  it('a rotation never restarted is lost: pending while running, a violation at the end', () => {
    const run = started();
    run.status('web-h1-a', '2');
    run.status('web-h1-b', '2');
    const [pending] = run.checker.pending();
    assert.equal(pending?.workload, 'deployment/ns/web');
    assert.match(pending?.config ?? '', /^\(rotation of vault-db → secret\/api-key=7,secret\/db-password=2/);
    const { kinds } = run.finish();
    assert.deepEqual(kinds, ['csi-rotation-not-restarted']);
  });

  it('a rotation followed by another before any restart: the first is lost', () => {
    const run = started();
    run.status('web-h1-a', '2');
    run.status('web-h1-a', '3');
    run.deployment('t1');
    assert.deepEqual(run.finish().kinds, ['csi-rotation-not-restarted']);
  });

  it('two restarts for one rotation: the second is doubled', () => {
    const run = started();
    run.status('web-h1-a', '2');
    run.deployment('t1');
    run.deployment('t1-again');
    assert.deepEqual(run.finish().kinds, ['csi-restart-without-rotation']);
  });

  it('a restart for the restart’s own new pods getting their statuses fires', () => {
    const run = started();
    run.status('web-h1-a', '2');
    run.deployment('t1');
    rollOut(run, 'h2', '2');
    run.deployment('t2');
    const { kinds, counters } = run.finish();
    assert.deepEqual(kinds, ['csi-restart-without-rotation']);
    assert.equal(counters['csiRotationsRestarted'], 1);
  });

  it('a restart with nothing rotated at all fires', () => {
    const run = started();
    run.deployment('t1');
    assert.deepEqual(run.finish().kinds, ['csi-restart-without-rotation']);
  });

  it('a status seen before its pod (another watch stream) still counts, in resourceVersion order', () => {
    const run = started();
    const rotatedAt = run.nextRv();
    run.deployment('t1'); // the Deployment stream is ahead
    run.status('web-h2-x', '2', { rv: rotatedAt }); // a new pod, not seen yet, written before the restart
    run.pod('web-h2-x', 'h2');
    assert.deepEqual(run.finish().kinds, []);
  });

  it('other workloads’ pods and workloads not opted in are not this workload’s rotations', () => {
    const run = started();
    run.deployment(undefined, { name: 'other', optIn: false });
    run.pod('other-h9-a', 'h9', { deployment: 'other' });
    run.status('other-h9-a', '5');
    run.deployment('t1', { name: 'other', optIn: false });
    const { kinds, counters } = run.finish();
    assert.deepEqual(kinds, []);
    assert.equal(counters['csiRotations'], 0);
  });

  it('a rotation seen only on a relist after its restart (its first write missed) explains that restart', () => {
    const run = started();
    run.deployment('t1');
    // The old pod that carried the first write is gone; a relist shows the second pod's later write.
    run.pod('web-h2-x', 'h2');
    run.status('web-h2-x', '2', { relist: true });
    assert.deepEqual(run.finish().kinds, []);
  });
});

const step = (rv: number, exact = true): Step => ({ rv: BigInt(rv), exact, at: rv, label: String(rv) });

describe('judgeRotations', () => {
  it('alternating rotations and restarts all match; dropping a restart loses one; adding one is unexplained', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 20 }), fc.nat(), (gaps, pick) => {
        let rv = 0;
        const rotations: Step[] = [];
        const restarts: Step[] = [];
        for (const gap of gaps) {
          rotations.push(step((rv += gap)));
          restarts.push(step((rv += gap)));
        }
        const all = judgeRotations(rotations, restarts, true);
        assert.equal(all.matched, gaps.length);
        assert.deepEqual([all.lost, all.unexplained], [[], []]);

        const dropped = pick % restarts.length;
        const fewer = judgeRotations(rotations, restarts.toSpliced(dropped, 1), true);
        assert.deepEqual(
          fewer.lost.map((s) => s.rv),
          [rotations[dropped]!.rv],
        );
        assert.deepEqual(fewer.unexplained, []);

        const extra = step(Number(restarts[dropped]!.rv) * 10 + 1);
        const doubled = judgeRotations(
          rotations.map((s) => ({ ...s, rv: s.rv * 10n })),
          [...restarts.map((s) => ({ ...s, rv: s.rv * 10n })), extra],
          true,
        );
        assert.deepEqual(
          doubled.unexplained.map((s) => s.rv),
          [extra.rv],
        );
        assert.deepEqual(doubled.lost, []);
      }),
    );
  });

  it('a rotation still waiting is outstanding while running and lost at the end', () => {
    assert.equal(judgeRotations([step(1)], [], false).outstanding?.rv, 1n);
    assert.deepEqual(judgeRotations([step(1)], [], false).lost, []);
    assert.deepEqual(
      judgeRotations([step(1)], [], true).lost.map((s) => s.rv),
      [1n],
    );
  });

  it('an exact rotation after an unexplained restart does not explain it; a relisted one does', () => {
    assert.equal(judgeRotations([step(2)], [step(1)], false).unexplained.length, 1);
    assert.deepEqual(judgeRotations([step(2, false)], [step(1)], true), {
      matched: 1,
      lost: [],
      unexplained: [],
      outstanding: undefined,
    });
  });
});
