// The namespace scope of an install that shares the cluster: Reloader's
// legacy selector forms converted, and the filter's bookkeeping of which
// namespaces are in and who is told when that changes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { inScope, NamespaceFilter, namespaceSelectorText } from '../../../src/runtime/informer/namespacescope.ts';
import { FlagSet } from '../../../src/runtime/flags/flagset.ts';
import { registerRuntimeFlags } from '../../../src/runtime/runtimeflags.ts';

describe('namespaceSelectorText', () => {
  it("converts Reloader's legacy forms and keeps the label-selector grammar as it is", () => {
    assert.equal(namespaceSelectorText(['team:a']), 'team=a');
    assert.equal(namespaceSelectorText(['team:*']), 'team');
    assert.equal(namespaceSelectorText(['team:a', 'env:*']), 'team=a,env');
    assert.equal(namespaceSelectorText(['team:a,env:*']), 'team=a,env', 'one value holding several');
    assert.equal(namespaceSelectorText(['example.com/team: a ']), 'example.com/team=a');
    assert.equal(namespaceSelectorText(['team=a,env!=dev']), 'team=a,env!=dev');
    assert.equal(namespaceSelectorText(['env in (a,b)', 'team:x']), 'env in (a,b),team=x', 'a set split at its comma');
    assert.equal(namespaceSelectorText(['!legacy', 'tier notin (x)']), '!legacy,tier notin (x)');
    assert.equal(namespaceSelectorText([]), '');
    assert.equal(namespaceSelectorText(['', ' ']), '');
  });

  it('leaves any selector without a colon unchanged (but for spaces around its commas)', () => {
    const word = fc.stringMatching(/^[a-z][a-z0-9]{0,5}$/);
    const term = fc.oneof(
      word,
      fc.tuple(word, word).map(([k, v]) => `${k}=${v}`),
      fc.tuple(word, word).map(([k, v]) => `${k}!=${v}`),
      word.map((k) => `!${k}`),
    );
    fc.assert(
      fc.property(fc.array(term, { minLength: 1, maxLength: 4 }), (terms) => {
        assert.equal(namespaceSelectorText([terms.join(',')]), terms.join(','));
      }),
    );
  });
});

describe('the namespace scope', () => {
  it('ignored namespaces are out whatever the selector; without a selector every other is in', () => {
    assert.equal(inScope({ selector: '', ignored: ['kube-system'] }, 'kube-system', true), false);
    assert.equal(inScope({ selector: '', ignored: ['kube-system'] }, 'team-a', false), true);
    assert.equal(inScope({ selector: 'team=a', ignored: [] }, 'team-a', false), false, 'not selected (yet)');
    assert.equal(inScope({ selector: 'team=a', ignored: [] }, 'team-a', true), true);
    assert.equal(inScope({ selector: 'team=a', ignored: ['team-a'] }, 'team-a', true), false);
  });

  it('tells its listeners of each namespace that enters or leaves, once, and admits cluster-scoped objects', () => {
    const filter = new NamespaceFilter({ selector: 'team=a', ignored: ['ignored'] });
    const changes: string[] = [];
    const unsubscribe = filter.onChange((ns, admitted) => changes.push(`${admitted ? '+' : '-'}${ns}`));
    assert.equal(filter.admits(undefined), true, 'cluster-scoped');
    assert.equal(filter.admits('a'), false, 'not seen yet');
    filter.observe('a');
    filter.observe('a');
    filter.observe('ignored');
    assert.equal(filter.admits('a'), true);
    assert.equal(filter.admits('ignored'), false);
    filter.forget('a');
    filter.forget('never-seen');
    assert.equal(filter.admits('a'), false);
    unsubscribe();
    filter.observe('a');
    assert.deepEqual(changes, ['+a', '-a']);
  });

  it('without a selector, names alone decide and no namespace cache is needed', () => {
    const filter = new NamespaceFilter({ selector: '', ignored: ['kube-system'] });
    assert.equal(filter.selector, '');
    assert.equal(filter.admits('team-a'), true);
    assert.equal(filter.admits('kube-system'), false);
  });
});

describe('the namespace scope flags', () => {
  const parse = (...argv: string[]) => {
    const fs = new FlagSet('stateward');
    const flags = registerRuntimeFlags(fs);
    const result = fs.parse(['-kubernetes.namespace=ops', ...argv], {});
    assert.equal(result.kind, 'ok', JSON.stringify(result));
    return { config: flags.read(), problem: flags.validate() };
  };

  it("reads Stateward's and Reloader's spellings alike", () => {
    assert.equal(
      parse('-kubernetes.namespace-selector=team=a,env in (x,y)').config.namespaceSelector,
      'team=a,env in (x,y)',
    );
    assert.equal(
      parse('--namespace-selector=team:a', '--namespace-selector=env:*').config.namespaceSelector,
      'team=a,env',
    );
    assert.deepEqual(
      parse('-kubernetes.namespaces-to-ignore=a', '--namespaces-to-ignore=b,c').config.namespacesToIgnore,
      ['a', 'b', 'c'],
    );
    assert.deepEqual(parse('--namespaces=team-a,team-b').config.watchNamespaces, ['team-a', 'team-b']);
    const none = parse().config;
    assert.equal(none.namespaceSelector, '');
    assert.deepEqual(none.namespacesToIgnore, []);
    assert.deepEqual(none.watchNamespaces, ['ops']);
  });

  it('refuses two spellings of one setting, and "*" in a list of namespaces', () => {
    assert.match(
      parse('-kubernetes.namespace-selector=a=b', '--namespace-selector=c:d').problem ?? '',
      /give one of them/,
    );
    assert.match(parse('-kubernetes.watch-namespaces=a', '--namespaces=b').problem ?? '', /give one of them/);
    assert.match(parse('--namespaces=*').problem ?? '', /for the whole cluster give none/);
  });
});
