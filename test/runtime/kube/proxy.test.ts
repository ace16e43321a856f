// Proxy selection by Go's httpproxy rules (what client-go's
// ProxyFromEnvironment does): HTTPS_PROXY/HTTP_PROXY, NO_PROXY's hosts,
// domains, IPs, CIDRs, ports and `*`, loopback never proxied; proxy-url
// always used. The tunnel itself is tested against the real apiserver
// (connection.int.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { bypassesProxy, parseProxyUrl, proxyFor } from '../../../src/runtime/kube/proxy.ts';
import { assertReaching, SKIP } from '../../support/reach.ts';

describe('NO_PROXY (Go httpproxy semantics)', () => {
  const noProxy =
    'foobar.com, .barbaz.net, *.qux.org, 192.168.1.1, 192.168.1.2:81, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, 2002:db8:a::45/64, bar.baz:443';
  const cases: [string, string, boolean][] = [
    ['localhost', '443', true],
    ['127.0.0.1', '443', true],
    ['127.1.2.3', '443', true],
    ['::1', '443', true],
    ['foobar.com', '443', true],
    ['www.foobar.com', '443', true],
    ['FOOBAR.com', '443', true],
    ['foofoobar.com', '443', false],
    ['barbaz.net', '443', false],
    ['www.barbaz.net', '443', true],
    ['qux.org', '443', false],
    ['www.qux.org', '443', true],
    ['192.168.1.1', '443', true],
    ['192.168.1.2', '81', true],
    ['192.168.1.2', '443', false],
    ['10.0.0.2', '443', true],
    ['10.0.0.4', '443', false],
    ['::ffff:10.0.0.3', '443', true],
    ['2001:db8::52:0:1', '443', true],
    ['[2001:db8:0::52:0:1]', '443', true],
    ['2001:db8::52:0:2', '443', true],
    ['2001:db8::52:0:2', '80', false],
    ['2002:db8:a::123', '443', true],
    ['2002:db8:b::1', '443', false],
    ['bar.baz', '443', true],
    ['bar.baz', '6443', false],
    ['eks.amazonaws.com', '443', false],
  ];
  for (const [host, port, bypass] of cases) {
    it(`${host}:${port} ${bypass ? 'goes direct' : 'goes through the proxy'}`, () => {
      assert.equal(bypassesProxy(noProxy, host, port), bypass);
    });
  }

  const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?$/);
  const domain = fc.array(label, { minLength: 1, maxLength: 4 }).map((l) => l.join('.'));
  const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255));
  const port = fc.integer({ min: 1, max: 65535 }).map(String);

  it('* sends everything direct; an empty NO_PROXY only loopback and localhost', () => {
    fc.assert(
      fc.property(domain, port, (host, p) => {
        assert.equal(bypassesProxy('*', host, p), true);
        assert.equal(bypassesProxy(' , ', host, p), host === 'localhost');
      }),
    );
  });

  it('a domain matches itself and its subdomains; .domain and *.domain only its subdomains', () => {
    assertReaching(
      fc.tuple(domain, label, domain, port),
      ([d, sub, other, p]) => {
        // Names, not addresses: an IP entry matches only that IP (Go's ipMatch), a loopback one is never proxied.
        if (!(/[a-z]/.test(d) && /[a-z]/.test(other) && !other.endsWith(d) && other !== 'localhost')) return SKIP;
        assert.equal(bypassesProxy(d, d, p), true);
        assert.equal(bypassesProxy(d, `${sub}.${d}`, p), true);
        assert.equal(bypassesProxy(`.${d}`, d, p), d === 'localhost');
        assert.equal(bypassesProxy(`.${d}`, `${sub}.${d}`, p), true);
        assert.equal(bypassesProxy(`*.${d}`, `${sub}.${d}`, p), true);
        assert.equal(bypassesProxy(`${d}:${p}`, `${sub}.${d}`, p), true);
        assert.equal(bypassesProxy(`${d}:${p}`, d, `${(Number(p) % 65535) + 1}`), false);
        assert.equal(bypassesProxy(d, other, p), false);
      },
      { floor: 0.5 }, // about 80%: all-digit names and an other ending in d are skipped
    );
  });

  it('a CIDR matches exactly the addresses sharing its prefix', () => {
    fc.assert(
      fc.property(ipv4, ipv4, fc.integer({ min: 0, max: 32 }), (net, ip, bits) => {
        const toInt = (a: number[]) => a.reduce((n, b) => n * 256 + b, 0);
        const mask = bits === 0 ? 0 : Number((0xffffffffn << BigInt(32 - bits)) & 0xffffffffn);
        const inside = (toInt(ip) & mask) >>> 0 === (toInt(net) & mask) >>> 0;
        const loopback = ip[0] === 127;
        assert.equal(bypassesProxy(`${net.join('.')}/${bits}`, ip.join('.'), '443'), inside || loopback);
      }),
    );
  });
});

describe('proxyFor', () => {
  it('takes HTTPS_PROXY for https, HTTP_PROXY for http, the uppercase name first, http:// when no scheme', () => {
    const env = { HTTPS_PROXY: 'proxy.corp:3128', https_proxy: 'http://lower:1', HTTP_PROXY: 'http://plain:8080' };
    assert.equal(proxyFor('https://api.example.com', undefined, env)?.href, 'http://proxy.corp:3128/');
    assert.equal(proxyFor('http://api.example.com', undefined, env)?.href, 'http://plain:8080/');
    assert.equal(proxyFor('https://api.example.com', undefined, { https_proxy: 'http://lower:1' })?.host, 'lower:1');
    assert.equal(proxyFor('https://api.example.com', undefined, {}), undefined);
    assert.equal(proxyFor('https://api.example.com', undefined, { ...env, NO_PROXY: 'example.com' }), undefined);
    assert.equal(proxyFor('https://api.example.com', undefined, { ...env, no_proxy: '.example.com:443' }), undefined);
    assert.equal(
      proxyFor('https://api.example.com:6443', undefined, { ...env, NO_PROXY: 'example.com:443' })?.host,
      'proxy.corp:3128',
    );
  });

  it('uses proxy-url for every request, NO_PROXY and loopback included', () => {
    const env = { NO_PROXY: '*' };
    assert.equal(proxyFor('https://127.0.0.1:6443', 'https://user:pw@p:8443', env)?.href, 'https://user:pw@p:8443/');
  });

  it('names a proxy it cannot use', () => {
    assert.throws(
      () => proxyFor('https://a', 'socks5://p:1080', {}),
      /^Error: proxy-url: socks5 proxies are not supported/,
    );
    assert.throws(
      () => proxyFor('https://a', undefined, { HTTPS_PROXY: 'http://[bad' }),
      /^Error: HTTPS_PROXY: "http:\/\/\[bad" is not a proxy URL$/,
    );
    assert.equal(parseProxyUrl('ftp://p:21'), '"ftp://p:21" is not an http or https proxy URL');
  });
});
