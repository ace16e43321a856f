// Checking the context in use (src/runtime/kube/kubeconfigvalidation.ts,
// through KubeConfig.confirmUsable, as client-go's ConfirmUsable): what is
// refused, each in one line naming the entry, and what elsewhere in the file
// does not matter.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { parseKubeConfig } from '../../../src/runtime/kube/kubeconfig.ts';
import { apply, b64, config, failure } from './kubeconfigsupport.ts';

describe('confirmUsable', () => {
  const usable = (text: string) => () => parseKubeConfig(text).confirmUsable();

  it('checks only the context in use: broken entries elsewhere do not matter', () => {
    const text = stringify({
      clusters: [
        { name: 'c', cluster: { server: 'https://x' } },
        { name: 'broken', cluster: { 'proxy-url': 'http://proxy' } },
      ],
      users: [
        { name: 'u', user: { token: 't' } },
        { name: 'gcp', user: { 'auth-provider': { name: 'gcp' } } },
      ],
      contexts: [
        { name: 'ctx', context: { cluster: 'c', user: 'u' } },
        { name: 'bad', context: { cluster: 'broken', user: 'gcp' } },
      ],
      'current-context': 'ctx',
    });
    parseKubeConfig(text).confirmUsable();
  });

  it('refuses auth-provider users, naming the user and suggesting an exec plugin', async () => {
    for (const name of ['gcp', 'azure', 'custom']) {
      const message = await failure(usable(config({ 'auth-provider': { name, config: { 'access-token': 'x' } } })));
      assert.match(
        message,
        new RegExp(`^user "u" uses auth-provider "${name}", which Stateward does not support .*exec credential plugin`),
      );
    }
    // The reason is true for each and names the plugin that replaces it; oidc is run (oidc.test.ts), once complete.
    assert.equal(
      await failure(usable(config({ 'auth-provider': { name: 'oidc', config: { 'id-token': 'x' } } }))),
      'user "u": the oidc auth-provider needs client-id',
    );
    assert.match(await failure(usable(config({ 'auth-provider': { name: 'gcp' } }))), /gke-gcloud-auth-plugin/);
    assert.match(await failure(usable(config({ 'auth-provider': { name: 'azure' } }))), /Azure\/kubelogin/);
    assert.match(
      await failure(usable(config({ 'auth-provider': { name: 'custom' } }))),
      /does not support \(it runs no auth-provider plugins\): use an exec credential plugin instead$/,
    );
  });

  it('refuses what Stateward does not support and what kubectl refuses', async () => {
    const cases: [string, RegExp][] = [
      [
        config({}, { server: 'https://x', 'proxy-url': 'socks5://proxy:1080' }),
        /^cluster "c": proxy-url socks5 proxies are not supported \(http and https are\)/,
      ],
      [config({}, { 'certificate-authority-data': b64('ca') }), /^cluster "c" has no server$/],
      [config({}, { server: '10.0.0.1:6443' }), /^cluster "c": server "10.0.0.1:6443" is not an http or https URL$/],
      [
        config({}, { server: 'https://x', 'certificate-authority-data': b64('ca'), 'certificate-authority': '/ca' }),
        /both set/,
      ],
      [
        config({}, { server: 'https://x', 'certificate-authority-data': b64('ca'), 'insecure-skip-tls-verify': true }),
        /insecure-skip-tls-verify cannot both be set/,
      ],
      [config({ token: 't', username: 'a', password: 'b' }), /^user "u" has more than one authentication method/],
      [
        config({ 'client-certificate-data': b64('cert') }),
        /^user "u": a client certificate needs client-key or client-key-data$/,
      ],
      [config({ 'client-key-data': b64('key') }), /^user "u": a client key needs client-certificate/],
      [config({ 'as-groups': ['admins'] }), /^user "u": as-groups needs as \(the user to impersonate\)$/],
      [config({ 'as-uid': '1', 'as-user-extra': { k: ['v'] } }), /^user "u": as-uid, as-user-extra needs as/],
      [config({ as: 'bob', 'as-groups': ['a\nb'] }), /^user "u": as-groups\[0\] contains a line break/],
      [config({ as: 'bob', 'as-user-extra': { k: 'v' } }), /as-user-extra: k must be a list, not a string/],
      [config({ token: 'abc\n' }), /^user "u": token contains a line break or a NUL character$/],
      [
        config({ exec: { apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Never' } }),
        /exec needs a command/,
      ],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1alpha1' } }),
        /exec apiVersion "client.authentication.k8s.io\/v1alpha1" is not supported/,
      ],
      [config({ exec: { command: 'x' } }), /exec apiVersion is missing/],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1' } }),
        /interactiveMode must be set/,
      ],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1', interactiveMode: 'Always' } }),
        /needs a terminal/,
      ],
      [
        config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1beta1', env: [{ value: 'v' }] } }),
        /env has a variable without a name/,
      ],
      [
        config({ 'client-certificate': '/nonexistent/client.crt', 'client-key': '/nonexistent/client.key' }),
        /^user "u": client-certificate: cannot read \/nonexistent\/client.crt: ENOENT$/,
      ],
      [config({ tokenFile: '/nonexistent/token' }), /^user "u": tokenFile: cannot read \/nonexistent\/token: ENOENT$/],
      [
        stringify({
          clusters: [{ name: 'c', cluster: { server: 'https://x' } }],
          contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'ghost' } }],
          'current-context': 'ctx',
        }),
        /^context "ctx" names user "ghost", which is not defined$/,
      ],
    ];
    for (const [text, expected] of cases) assert.match(await failure(usable(text)), expected, text);
    // v1beta1 defaults interactiveMode to IfAvailable, as client-go does.
    parseKubeConfig(
      config({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1beta1' } }),
    ).confirmUsable();
  });

  it('refuses an auth-provider even when nobody called confirmUsable (never silently unauthenticated)', async () => {
    const kc = parseKubeConfig(config({ 'auth-provider': { name: 'gcp' } }));
    assert.match(await failure(() => apply(kc)), /auth-provider "gcp"/);
  });
});
