// The real node's configuration files (realnode.ts writes them under the
// cluster's state directory, real-node/): its certificates from the cluster
// CA, kubeconfigs, containerd's config, the CNI network, the kubelet's and
// kube-proxy's configurations, and the script that gives the kubelet its own
// mount namespace. Pure apart from key generation, so a unit test reads them.
import { join } from 'node:path';
import { stringify } from 'yaml';
import { caFromPem, issue, type Pem } from './pki.ts';
import { CNI_BIN_DIR, REAL_NODE } from './realnode-host.ts';

export const KUBELET_SYSCTLS: Record<string, string> = {
  // What the kubelet sets on start (protectKernelDefaults=false): it sees these
  // values in its own mount namespace, the machine keeps its own.
  'vm/overcommit_memory': '1',
  'vm/panic_on_oom': '0',
  'kernel/panic': '10',
  'kernel/panic_on_oops': '1',
  'kernel/keys/root_maxkeys': '1000000',
  'kernel/keys/root_maxbytes': '25000000',
};

export interface NodeConfigInput {
  name: string;
  ip: string;
  /** Where the files go: paths inside them point there. */
  configDir: string;
  containerdSocket: string;
  apiserverPort: number;
  ca: Pem;
  /** The sandbox image's reference. */
  pauseImage: string;
  /** runc's path (Debian's). */
  runc: string;
}

/** File name (relative to configDir) to content. */
export async function nodeConfigFiles(input: NodeConfigInput): Promise<Record<string, string>> {
  const ca = await caFromPem(input.ca);
  const p = (...parts: string[]) => join(input.configDir, ...parts);
  const files: Record<string, string> = { 'pki/ca.crt': input.ca.cert };
  const put = (name: string, pem: Pem) => {
    files[`pki/${name}.crt`] = pem.cert;
    files[`pki/${name}.key`] = pem.key;
  };
  put('kubelet-client', await issue(ca, { subject: `CN=system:node:${input.name}, O=system:nodes`, usage: 'client' }));
  put(
    'kubelet-serving',
    await issue(ca, {
      subject: `CN=system:node:${input.name}`,
      usage: 'server',
      dnsNames: [input.name, 'localhost'],
      ipAddresses: [input.ip, '127.0.0.1'],
    }),
  );
  put('kube-proxy', await issue(ca, { subject: 'CN=system:kube-proxy', usage: 'client' }));
  const server = `https://127.0.0.1:${input.apiserverPort}`;
  const kubeconfig = (user: string) =>
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server, 'certificate-authority': p('pki/ca.crt') } }],
      users: [{ name: user, user: { 'client-certificate': p(`pki/${user}.crt`), 'client-key': p(`pki/${user}.key`) } }],
      contexts: [{ name: 'local', context: { cluster: 'local', user } }],
      'current-context': 'local',
    });
  files['kubelet.kubeconfig'] = kubeconfig('kubelet-client');
  files['kube-proxy.kubeconfig'] = kubeconfig('kube-proxy');

  const run_ = REAL_NODE.runDir;
  const var_ = REAL_NODE.varDir;
  // containerd v2's own config format (version 3). Everything it would put in
  // system directories is moved under ours or turned off.
  files['containerd.toml'] = `version = 3
root = '${var_}/containerd'
state = '${run_}/containerd/state'
imports = []
disabled_plugins = [
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.erofs',
  'io.containerd.differ.v1.erofs',
  'io.containerd.nri.v1.nri',
  'io.containerd.image-verifier.v1.bindir',
  'io.containerd.internal.v1.opt',
]

[grpc]
  address = '${input.containerdSocket}'

[ttrpc]
  address = '${input.containerdSocket}.ttrpc'

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '${input.pauseImage}'

[plugins.'io.containerd.cri.v1.runtime']
  # Root lacks CAP_SYS_RESOURCE on some machines (these VMs), so runc cannot give
  # the pause container the oom_score_adj (-998) the kubelet asks for: clamp every
  # container's to containerd's own instead.
  restrict_oom_score_adj = true
  cdi_spec_dirs = []
  # Pod network namespaces under containerd's state directory, not /run/netns.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '${input.runc}'
        Root = '${run_}/runc'
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['${CNI_BIN_DIR}']
    conf_dir = '${p('cni')}'

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'

[plugins.'io.containerd.shim.v1.manager']
  socket_dir = '${run_}/containerd/s'
`;
  // One bridge, host-local addresses from the node's pod CIDR, no masquerade:
  // pods talk to the apiserver (through the forwarder on the gateway), to each
  // other and to Services, never out of the machine.
  files['cni/10-stateward.conflist'] = JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: REAL_NODE.cniNetwork,
      plugins: [
        {
          type: 'bridge',
          bridge: REAL_NODE.bridge,
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: join(var_, 'cni', 'networks'),
            ranges: [[{ subnet: REAL_NODE.podCidr, gateway: REAL_NODE.gateway }]],
            routes: [{ dst: '0.0.0.0/0' }],
          },
        },
      ],
    },
    null,
    2,
  );
  files['kubelet.yaml'] = stringify({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // These machines mount cgroup v1; the kubelet still runs on it when told so.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    containerRuntimeEndpoint: `unix://${input.containerdSocket}`,
    imageServiceEndpoint: `unix://${input.containerdSocket}`,
    podLogsDir: join(var_, 'pod-logs'),
    // The apiserver (logs, exec, port-forward) and anyone else: client
    // certificates of the cluster CA or bearer tokens (TokenReview),
    // authorised by the apiserver (SubjectAccessReview); no anonymous access.
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: p('pki/ca.crt') },
    },
    authorization: { mode: 'Webhook' },
    tlsCertFile: p('pki/kubelet-serving.crt'),
    tlsPrivateKeyFile: p('pki/kubelet-serving.key'),
    address: input.ip,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    clusterDomain: 'cluster.local',
    failSwapOn: false,
    // Images exist only locally: never collect them, never evict for disk.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '1%',
      'imagefs.available': '1%',
      'nodefs.inodesFree': '1%',
    },
    maxPods: 30,
    registerWithTaints: [REAL_NODE.taint],
    serializeImagePulls: false,
  });
  files['kube-proxy.yaml'] = stringify({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: 'iptables',
    clientConnection: { kubeconfig: p('kube-proxy.kubeconfig') },
    hostnameOverride: input.name,
    clusterCIDR: REAL_NODE.podCidr,
    bindAddress: '0.0.0.0',
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '127.0.0.1:10249',
    // 0: leave the machine's conntrack sysctls as they are.
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    // true would set net.ipv4.conf.all.route_localnet on the machine.
    iptables: { localhostNodePorts: false },
  });
  // The kubelet sets kernel tunables on start; in its own mount namespace it
  // finds them already set (bind-mounted files holding its values), so this
  // machine's stay untouched. /proc is made private there first so the bind
  // mounts cannot propagate back; the kubelet's root stays shared (mounted
  // rshared before) so pod volumes reach containerd and runc.
  const binds = Object.entries(KUBELET_SYSCTLS).map(([key, value]) => {
    const file = p('sysctl', key.replaceAll('/', '.'));
    files[`sysctl/${key.replaceAll('/', '.')}`] = `${value}\n`;
    return `[ "$(cat /proc/sys/${key})" = "${value}" ] || mount --bind '${file}' /proc/sys/${key}`;
  });
  files['kubelet-namespace.sh'] = ['set -e', 'mount --make-rprivate /proc', ...binds, 'exec "$@"', ''].join('\n');

  return files;
}
