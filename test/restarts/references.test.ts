import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  configKey,
  configReferences,
  parseConfigKey,
  type ConfigKind,
  type PodTemplateSpec,
} from '../../src/restarts/references.ts';
import { NS, ALL_KEYS, fullTemplate } from './workloads.ts';

describe('configKey / parseConfigKey', { timeout: 10000 }, () => {
  it("uses xing's checksum key format and round-trips", () => {
    assert.equal(configKey('configmap', 'ns', 'a.b'), 'configmap/ns/a.b');
    assert.equal(configKey('secret', 'ns', 'x'), 'secret/ns/x');
    assert.deepEqual(parseConfigKey('secret/ns/x'), { kind: 'secret', namespace: 'ns', name: 'x' });
    for (const bad of ['', 'pod/ns/x', 'secret/ns', 'secret/ns/x/y', 'secret//x'])
      assert.equal(parseConfigKey(bad), undefined, bad);
  });
});

describe('configReferences', { timeout: 10000 }, () => {
  it('finds every reference path, across containers, initContainers and ephemeralContainers', () => {
    const refs = configReferences(fullTemplate(), NS);
    assert.deepEqual(
      refs.map((r) => r.key),
      ALL_KEYS,
    );
    const by = new Map(refs.map((r) => [r.name, r]));
    assert.deepEqual(by.get('env-cm')?.uses, [
      { via: 'env', container: { type: 'container', name: 'app' }, env: 'CM_KEY', key: 'k1', optional: false },
    ]);
    assert.deepEqual(by.get('init-secret')?.uses, [
      { via: 'envFrom', container: { type: 'initContainer', name: 'init' }, optional: false },
    ]);
    assert.deepEqual(by.get('debug-cm')?.uses, [
      { via: 'envFrom', container: { type: 'ephemeralContainer', name: 'debug' }, optional: false },
    ]);
    assert.deepEqual(by.get('vol-secret')?.uses, [
      {
        via: 'volume',
        volume: 'secret-vol',
        items: ['tls.crt'],
        mountedBy: [{ type: 'initContainer', name: 'init' }],
        optional: false,
      },
    ]);
    assert.deepEqual(by.get('proj-secret')?.uses, [
      {
        via: 'projected',
        volume: 'proj',
        source: 1,
        items: undefined,
        mountedBy: [{ type: 'container', name: 'app' }],
        optional: false,
      },
    ]);
    for (const r of refs) {
      assert.equal(r.namespace, NS);
      assert.equal(r.kind, r.key.startsWith('secret/') ? 'secret' : 'configmap');
    }
  });

  it('dataKeys: the keys read, or "all" when a use takes the whole object', () => {
    const by = new Map(configReferences(fullTemplate(), NS).map((r) => [r.name, r.dataKeys]));
    assert.deepEqual(by.get('env-cm'), ['k1']);
    assert.deepEqual(by.get('proj-cm'), ['a', 'b']);
    assert.deepEqual(by.get('vol-secret'), ['tls.crt']);
    assert.equal(by.get('envfrom-cm'), 'all');
    assert.equal(by.get('vol-cm'), 'all');
  });

  it('deduplicates: one reference per config, identical uses once', () => {
    const t: PodTemplateSpec = {
      spec: {
        containers: [
          {
            name: 'a',
            envFrom: [{ configMapRef: { name: 'shared' } }, { configMapRef: { name: 'shared' } }],
            env: [{ name: 'X', valueFrom: { configMapKeyRef: { name: 'shared', key: 'x' } } }],
          },
          { name: 'b', envFrom: [{ configMapRef: { name: 'shared' } }] },
        ],
        volumes: [{ name: 'v', configMap: { name: 'shared' } }],
      },
    };
    const refs = configReferences(t, NS);
    assert.equal(refs.length, 1);
    assert.equal(refs[0]?.uses.length, 4);
    assert.equal(refs[0]?.dataKeys, 'all');
  });

  it('a ConfigMap and a Secret with the same name are different references', () => {
    const t: PodTemplateSpec = {
      spec: {
        containers: [{ name: 'a', envFrom: [{ configMapRef: { name: 'same' } }, { secretRef: { name: 'same' } }] }],
      },
    };
    assert.deepEqual(
      configReferences(t, NS).map((r) => r.key),
      ['configmap/prod/same', 'secret/prod/same'],
    );
  });

  it('optional only when every use is optional', () => {
    const t = (secondOptional: boolean | undefined): PodTemplateSpec => ({
      spec: {
        containers: [{ name: 'a', envFrom: [{ secretRef: { name: 's', optional: true } }] }],
        volumes: [
          {
            name: 'v',
            secret: { secretName: 's', ...(secondOptional === undefined ? {} : { optional: secondOptional }) },
          },
        ],
      },
    });
    assert.equal(configReferences(t(true), NS)[0]?.optional, true);
    assert.equal(configReferences(t(false), NS)[0]?.optional, false);
    assert.equal(configReferences(t(undefined), NS)[0]?.optional, false);
    const projected: PodTemplateSpec = {
      spec: {
        containers: [],
        volumes: [{ name: 'p', projected: { sources: [{ configMap: { name: 'c', optional: true } }] } }],
      },
    };
    assert.equal(configReferences(projected, NS)[0]?.optional, true);
  });

  it('counts unmounted volumes, and says so', () => {
    const t: PodTemplateSpec = {
      spec: { containers: [{ name: 'a' }], volumes: [{ name: 'unused', configMap: { name: 'c' } }] },
    };
    const [ref] = configReferences(t, NS);
    assert.equal(ref?.key, 'configmap/prod/c');
    assert.deepEqual(ref?.uses, [
      { via: 'volume', volume: 'unused', items: undefined, mountedBy: [], optional: false },
    ]);
  });

  it('skips nameless references and never throws on odd shapes', () => {
    const t = {
      spec: {
        containers: [{ name: 'a', envFrom: [{ configMapRef: {} }, { secretRef: { name: '' } }] }],
        volumes: [{ name: 'v', secret: {} }],
      },
    } as PodTemplateSpec;
    assert.deepEqual(configReferences(t, NS), []);
    assert.deepEqual(configReferences(undefined, NS), []);
    fc.assert(
      fc.property(fc.anything(), (junk) => {
        configReferences(junk as PodTemplateSpec, NS);
        configReferences({ spec: junk } as PodTemplateSpec, NS);
        configReferences(
          { spec: { containers: [junk], volumes: [junk], initContainers: junk } } as PodTemplateSpec,
          NS,
        );
      }),
    );
  });

  // --- properties over generated templates ---

  interface Planned {
    kind: ConfigKind;
    name: string;
    optional: boolean;
    path: 'env' | 'envFrom' | 'volume' | 'projected';
    container: 'containers' | 'initContainers';
  }
  const plannedArb: fc.Arbitrary<Planned> = fc.record({
    kind: fc.constantFrom<ConfigKind>('configmap', 'secret'),
    name: fc.constantFrom('a', 'b', 'c', 'd', 'e.f'),
    optional: fc.boolean(),
    path: fc.constantFrom('env', 'envFrom', 'volume', 'projected'),
    container: fc.constantFrom('containers', 'initContainers'),
  });

  function build(plan: Planned[]): PodTemplateSpec {
    const containers = [{ name: 'main', env: [] as object[], envFrom: [] as object[] }];
    const initContainers = [{ name: 'init', env: [] as object[], envFrom: [] as object[] }];
    const volumes: object[] = [];
    plan.forEach((p, i) => {
      const c = p.container === 'containers' ? containers[0] : initContainers[0];
      const sel = { name: p.name, optional: p.optional };
      if (p.path === 'env')
        c?.env.push({
          name: `E${i}`,
          valueFrom: { [p.kind === 'configmap' ? 'configMapKeyRef' : 'secretKeyRef']: { ...sel, key: 'k' } },
        });
      if (p.path === 'envFrom') c?.envFrom.push({ [p.kind === 'configmap' ? 'configMapRef' : 'secretRef']: sel });
      if (p.path === 'volume')
        volumes.push({
          name: `v${i}`,
          ...(p.kind === 'configmap' ? { configMap: sel } : { secret: { secretName: p.name, optional: p.optional } }),
        });
      if (p.path === 'projected')
        volumes.push({
          name: `v${i}`,
          projected: { sources: [{ [p.kind === 'configmap' ? 'configMap' : 'secret']: sel }] },
        });
    });
    return { spec: { containers, initContainers, volumes } } as PodTemplateSpec;
  }

  it('property: every planted reference is found, deduplicated, with optional = all uses optional', () => {
    fc.assert(
      fc.property(fc.array(plannedArb, { maxLength: 20 }), (plan) => {
        const refs = configReferences(build(plan), NS);
        const expected = new Map<string, boolean>();
        for (const p of plan) {
          const key = configKey(p.kind, NS, p.name);
          expected.set(key, (expected.get(key) ?? true) && p.optional);
        }
        assert.deepEqual(
          refs.map((r) => r.key),
          [...expected.keys()].sort(),
        );
        for (const r of refs) assert.equal(r.optional, expected.get(r.key), r.key);
        // Identical envFrom entries are one use; env vars and volumes are distinct by name.
        const distinct = new Set(
          plan.map((p, i) =>
            p.path === 'envFrom' ? JSON.stringify([p.container, p.kind, p.name, p.optional]) : String(i),
          ),
        );
        assert.equal(
          refs.reduce((n, r) => n + r.uses.length, 0),
          distinct.size,
        );
      }),
    );
  });

  it('property: the output does not depend on the order of containers, env, envFrom, volumes or sources', () => {
    const shuffle = <T>(xs: T[] | undefined, seed: number): T[] | undefined => {
      if (!xs) return xs;
      const out = [...xs];
      for (let i = out.length - 1; i > 0; i--) {
        const j = (seed * (i + 7)) % (i + 1);
        [out[i], out[j]] = [out[j] as T, out[i] as T];
      }
      return out;
    };
    fc.assert(
      fc.property(fc.array(plannedArb, { maxLength: 20 }), fc.nat(1000), (plan, seed) => {
        const t = build(plan);
        const spec = t.spec;
        assert.ok(spec);
        const shuffled: PodTemplateSpec = {
          spec: {
            ...spec,
            containers:
              shuffle(
                spec.containers?.map((c) => ({
                  ...c,
                  env: shuffle(c.env, seed),
                  envFrom: shuffle(c.envFrom, seed + 1),
                })),
                seed,
              ) ?? [],
            volumes: shuffle(spec.volumes, seed + 2),
          },
        };
        assert.deepEqual(configReferences(shuffled, NS), configReferences(t, NS));
        assert.deepEqual(configReferences(t, NS), configReferences(t, NS));
      }),
    );
  });
});
