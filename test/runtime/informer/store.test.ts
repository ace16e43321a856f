import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  IndexedStore,
  indexByLabel,
  indexByOwnerUid,
  objectKey,
  stripManagedFields,
} from '../../../src/runtime/informer/store.ts';
import type { KubeObject } from '../../../src/runtime/kube/types.ts';

const object = (name: string, zone: string, owners: string[]): KubeObject => ({
  metadata: {
    name,
    namespace: 'ns',
    labels: { zone },
    ownerReferences: owners.map((uid) => ({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: uid, uid })),
  },
});

describe('IndexedStore', () => {
  it('keeps every index equal to a scan of the items, whatever the sequence of writes', () => {
    const op = fc.record({
      del: fc.boolean(),
      name: fc.constantFrom('a', 'b', 'c', 'd'),
      zone: fc.constantFrom('z1', 'z2'),
      owners: fc.subarray(['u1', 'u2', 'u3']),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const store = new IndexedStore<KubeObject>({ zone: indexByLabel('zone'), owner: indexByOwnerUid });
        for (const o of ops) {
          if (o.del) store.delete(`ns/${o.name}`);
          else store.set(`ns/${o.name}`, object(o.name, o.zone, o.owners));
        }
        for (const zone of ['z1', 'z2']) {
          const want = store
            .list()
            .filter((x) => x.metadata?.labels?.['zone'] === zone)
            .map(objectKey)
            .sort();
          assert.deepEqual(store.byIndex('zone', zone).map(objectKey).sort(), want);
        }
        for (const uid of ['u1', 'u2', 'u3']) {
          const want = store
            .list()
            .filter((x) => x.metadata?.ownerReferences?.some((r) => r.uid === uid))
            .map(objectKey)
            .sort();
          assert.deepEqual(store.byIndex('owner', uid).map(objectKey).sort(), want);
        }
      }),
    );
  });

  it('names an unknown index in its error, and survives an index function that throws', () => {
    const store = new IndexedStore<KubeObject>({
      bad: () => {
        throw new Error('malformed');
      },
    });
    store.set('ns/x', object('x', 'z1', []));
    assert.deepEqual(store.byIndex('bad', 'anything'), []);
    assert.throws(() => store.byIndex('nope', 'v'), /no index named "nope"/);
  });

  it('strips managedFields without touching the rest', () => {
    const o = {
      metadata: { name: 'x', managedFields: [{ manager: 'kubectl' }], labels: { a: 'b' } },
      spec: { replicas: 3 },
    };
    assert.deepEqual(stripManagedFields(o), { metadata: { name: 'x', labels: { a: 'b' } }, spec: { replicas: 3 } });
    assert.equal(o.metadata.managedFields.length, 1, 'the input is not mutated');
  });
});
