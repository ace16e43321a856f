// The real node's files and its iptables cleanup, without starting anything
// (the real node itself runs in test/deploy/realnode.int.test.ts).
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { createClusterPki } from './pki.ts';
import { KUBELET_SYSCTLS, nodeConfigFiles } from './realnode-config.ts';
import { kubeChainRemoval, REAL_NODE } from './realnode-host.ts';

async function files() {
  const pki = await createClusterPki();
  const config = await nodeConfigFiles({
    name: REAL_NODE.name,
    ip: '192.0.2.7',
    configDir: '/state/real-node',
    containerdSocket: '/run/stateward-real-node/containerd/containerd.sock',
    apiserverPort: 40123,
    ca: pki.ca,
    pauseImage: 'localhost/stateward/pause:abc',
    runc: '/usr/sbin/runc',
  });
  return { pki, config };
}

describe('real node configuration', () => {
  it('issues the kubelet a serving certificate for its address and name and client certificates as system:node and system:kube-proxy', async () => {
    const { pki, config } = await files();
    const ca = new X509Certificate(pki.ca.cert);
    const serving = new X509Certificate(config['pki/kubelet-serving.crt']!);
    assert.ok(serving.verify(ca.publicKey), 'signed by the cluster CA');
    for (const name of ['IP Address:192.0.2.7', 'IP Address:127.0.0.1', `DNS:${REAL_NODE.name}`])
      assert.ok(serving.subjectAltName?.includes(name), `${name} in ${serving.subjectAltName}`);
    const client = new X509Certificate(config['pki/kubelet-client.crt']!);
    assert.ok(client.verify(ca.publicKey));
    assert.match(client.subject, new RegExp(`CN=system:node:${REAL_NODE.name}`));
    assert.match(client.subject, /O=system:nodes/);
    assert.match(new X509Certificate(config['pki/kube-proxy.crt']!).subject, /CN=system:kube-proxy/);
  });

  it('lets no one into the kubelet anonymously: webhook authentication and authorisation, TLS from the cluster CA', async () => {
    const { config } = await files();
    const kubelet = parse(config['kubelet.yaml']!) as Record<string, unknown> & {
      authentication: {
        anonymous: { enabled: boolean };
        webhook: { enabled: boolean };
        x509: { clientCAFile: string };
      };
      authorization: { mode: string };
      registerWithTaints: unknown[];
    };
    assert.equal(kubelet.authentication.anonymous.enabled, false);
    assert.equal(kubelet.authentication.webhook.enabled, true);
    assert.equal(kubelet.authentication.x509.clientCAFile, '/state/real-node/pki/ca.crt');
    assert.equal(kubelet.authorization.mode, 'Webhook');
    assert.equal(kubelet['readOnlyPort'], 0);
    assert.equal(kubelet['tlsCertFile'], '/state/real-node/pki/kubelet-serving.crt');
    assert.equal(kubelet['cgroupDriver'], 'cgroupfs');
    assert.equal(kubelet['failCgroupV1'], false);
    assert.deepEqual(kubelet.registerWithTaints, [REAL_NODE.taint]);
    const kubeconfig = parse(config['kubelet.kubeconfig']!) as { clusters: { cluster: { server: string } }[] };
    assert.equal(kubeconfig.clusters[0]!.cluster.server, 'https://127.0.0.1:40123');
  });

  it('keeps containerd, the CNI network and kube-proxy in their own places and off the machine-wide settings', async () => {
    const { config } = await files();
    const containerd = config['containerd.toml']!;
    assert.match(containerd, /^version = 3$/m);
    assert.match(containerd, /^ {4}sandbox = 'localhost\/stateward\/pause:abc'$/m);
    assert.match(containerd, /^ {2}restrict_oom_score_adj = true$/m);
    assert.match(containerd, /^ {2}netns_mounts_under_state_dir = true$/m);
    assert.match(containerd, /^imports = \[\]$/m);
    assert.match(containerd, /'io\.containerd\.nri\.v1\.nri'/);
    for (const path of containerd.match(/(?<=')\/[^']+(?=')/g) ?? [])
      assert.ok(
        [REAL_NODE.varDir, REAL_NODE.runDir, '/state/real-node', '/usr/lib/cni', '/usr/sbin/runc'].some((d) =>
          path.startsWith(d),
        ),
        `${path} is ours or read-only`,
      );
    const cni = JSON.parse(config['cni/10-stateward.conflist']!) as {
      plugins: { type: string; bridge: string; ipMasq: boolean; ipam: { ranges: { subnet: string }[][] } }[];
    };
    assert.equal(cni.plugins[0]!.bridge, REAL_NODE.bridge);
    assert.equal(cni.plugins[0]!.ipMasq, false, 'no masquerading: no CNI iptables chains');
    assert.equal(cni.plugins[0]!.ipam.ranges[0]![0]!.subnet, REAL_NODE.podCidr);
    const proxy = parse(config['kube-proxy.yaml']!) as {
      conntrack: { maxPerCore: number };
      iptables: { localhostNodePorts: boolean };
    };
    assert.equal(proxy.conntrack.maxPerCore, 0, 'conntrack sysctls left alone');
    assert.equal(proxy.iptables.localhostNodePorts, false, 'route_localnet left alone');
  });

  it('gives the kubelet a private /proc before binding its sysctl values there, then execs it', async () => {
    const { config } = await files();
    const lines = config['kubelet-namespace.sh']!.trim().split('\n');
    assert.equal(lines[0], 'set -e');
    assert.equal(lines[1], 'mount --make-rprivate /proc');
    assert.equal(lines.at(-1), 'exec "$@"');
    for (const [key, value] of Object.entries(KUBELET_SYSCTLS)) {
      const file = `sysctl/${key.replaceAll('/', '.')}`;
      assert.equal(config[file], `${value}\n`);
      assert.ok(lines.some((l) => l.endsWith(`mount --bind '/state/real-node/${file}' /proc/sys/${key}`)));
    }
  });
});

describe('KUBE-* chain removal', () => {
  const saved = [
    '# Generated by iptables-save v1.8.9 (nf_tables)',
    '*mangle',
    ':PREROUTING ACCEPT [0:0]',
    ':KUBE-IPTABLES-HINT - [0:0]',
    ':KUBE-KUBELET-CANARY - [0:0]',
    'COMMIT',
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ':KUBE-SERVICES - [0:0]',
    ':KUBE-POSTROUTING - [0:0]',
    ':DOCKER - [0:0]',
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -d 10.0.0.0/8 -j DOCKER',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    '-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -j KUBE-SVC-X',
    'COMMIT',
    '*filter',
    ':INPUT ACCEPT [0:0]',
    '-A INPUT -j ACCEPT',
    'COMMIT',
  ].join('\n');

  it('deletes the jumps into KUBE-* chains exactly as saved, then the chains; nothing else', () => {
    const removal = kubeChainRemoval(saved);
    assert.deepEqual(
      removal.map((r) => [r.table, r.chains]),
      [
        ['mangle', ['KUBE-IPTABLES-HINT', 'KUBE-KUBELET-CANARY']],
        ['nat', ['KUBE-SERVICES', 'KUBE-POSTROUTING']],
      ],
    );
    assert.equal(
      removal[1]!.script,
      [
        '*nat',
        '-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-D OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
        '-D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
        '-F KUBE-SERVICES',
        '-F KUBE-POSTROUTING',
        '-X KUBE-SERVICES',
        '-X KUBE-POSTROUTING',
        'COMMIT',
        '',
      ].join('\n'),
    );
    assert.doesNotMatch(removal.map((r) => r.script).join('\n'), /DOCKER|INPUT/);
  });

  it('has nothing to do on a machine without KUBE-* chains', () => {
    assert.deepEqual(kubeChainRemoval('*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n'), []);
  });
});
