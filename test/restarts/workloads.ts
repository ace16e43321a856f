// Workloads and pod templates the config-restart tests share: one template
// that uses configs in every way the API allows, and a workload around it.
import type { PodTemplateSpec } from '../../src/restarts/references.ts';
import type { WorkloadLike } from '../../src/restarts/optins.ts';

export const NS = 'prod';

/** One use of every kind the API allows, split over containers, init and ephemeral containers. */
export function fullTemplate(): PodTemplateSpec {
  return {
    metadata: {},
    spec: {
      containers: [
        {
          name: 'app',
          env: [
            { name: 'PLAIN', value: 'x' },
            { name: 'CM_KEY', valueFrom: { configMapKeyRef: { name: 'env-cm', key: 'k1' } } },
            { name: 'SECRET_KEY', valueFrom: { secretKeyRef: { name: 'env-secret', key: 'password' } } },
            { name: 'FIELD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          envFrom: [{ configMapRef: { name: 'envfrom-cm' } }, { secretRef: { name: 'envfrom-secret' }, prefix: 'S_' }],
          volumeMounts: [
            { name: 'cm-vol', mountPath: '/cm' },
            { name: 'proj', mountPath: '/proj' },
          ],
        },
      ],
      initContainers: [
        {
          name: 'init',
          env: [{ name: 'INIT', valueFrom: { configMapKeyRef: { name: 'init-cm', key: 'i' } } }],
          envFrom: [{ secretRef: { name: 'init-secret' } }],
          volumeMounts: [{ name: 'secret-vol', mountPath: '/s' }],
        },
      ],
      ephemeralContainers: [{ name: 'debug', envFrom: [{ configMapRef: { name: 'debug-cm' } }] }],
      volumes: [
        { name: 'cm-vol', configMap: { name: 'vol-cm' } },
        { name: 'secret-vol', secret: { secretName: 'vol-secret', items: [{ key: 'tls.crt', path: 'crt' }] } },
        { name: 'empty', emptyDir: {} },
        {
          name: 'proj',
          projected: {
            sources: [
              {
                configMap: {
                  name: 'proj-cm',
                  items: [
                    { key: 'b', path: 'b' },
                    { key: 'a', path: 'a' },
                  ],
                },
              },
              { secret: { name: 'proj-secret' } },
              { serviceAccountToken: { path: 'token' } },
            ],
          },
        },
      ],
    },
  };
}

export const ALL_KEYS = [
  'configmap/prod/debug-cm',
  'configmap/prod/env-cm',
  'configmap/prod/envfrom-cm',
  'configmap/prod/init-cm',
  'configmap/prod/proj-cm',
  'configmap/prod/vol-cm',
  'secret/prod/env-secret',
  'secret/prod/envfrom-secret',
  'secret/prod/init-secret',
  'secret/prod/proj-secret',
  'secret/prod/vol-secret',
];

export function workload(
  annotations: Record<string, string>,
  template: PodTemplateSpec = fullTemplate(),
  name = 'web',
): WorkloadLike {
  return { metadata: { name, namespace: NS, annotations }, spec: { template } };
}
