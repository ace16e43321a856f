// The -reschedule.* flags and Strimzi Drain Cleaner's variables as profiles:
// which profiles a command line and an environment give, and the startup
// errors a bad combination gets.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FlagSet } from '../../../src/runtime/flags/flagset.ts';
import { registerRescheduleFlags, type RescheduleProfiles } from '../../../src/drain/reschedule/webhook.ts';

function flags(argv: string[], env: Record<string, string> = {}) {
  const fs = new FlagSet('stateward');
  const reschedule = registerRescheduleFlags(fs);
  const parsed = fs.parse(argv, env);
  assert.equal(parsed.kind, 'ok', JSON.stringify(parsed));
  return reschedule;
}

function profiles(argv: string[], env: Record<string, string> = {}): RescheduleProfiles {
  const read = flags(argv, env).read();
  assert.ok('profiles' in read, 'errors' in read ? read.errors.join('\n') : '');
  return read;
}

function errors(argv: string[], env: Record<string, string> = {}): string {
  const read = flags(argv, env).read();
  assert.ok('errors' in read, 'expected errors');
  return 'errors' in read ? read.errors.join('\n') : '';
}

function file(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'stateward-profiles-')), 'profiles.yaml');
  writeFileSync(path, text);
  return path;
}

describe('-reschedule.* flags: profiles', () => {
  it('nothing set: off; -reschedule.enabled alone: the one flags profile, as before', () => {
    assert.equal(flags([]).enabled(), false);
    const read = profiles(['-reschedule.enabled']);
    assert.equal(read.profiles.length, 1);
    assert.equal(read.profiles[0]?.name, undefined);
    assert.equal(read.strimzi, undefined);
    assert.deepEqual(read.profiles[0]?.annotation, { key: 'cao.couchbase.com/reschedule', value: 'true' });
  });

  it('any STRIMZI_* variable turns on the Strimzi profile (served at /drainer too), read as Drain Cleaner reads it', () => {
    const env = { STRIMZI_DRAIN_NAMESPACES: 'kafka', STRIMZI_DENY_EVICTION: 'false' };
    assert.equal(flags([], env).enabled(), true);
    const read = profiles([], env);
    assert.deepEqual(
      read.profiles.map((p) => p.name),
      ['strimzi'],
    );
    assert.equal(read.strimzi, read.profiles[0]);
    assert.equal(read.strimzi?.answer, 'allow');
    assert.deepEqual([...(read.strimzi?.namespaces ?? [])], ['kafka']);
    assert.equal(profiles(['-reschedule.strimzi.enabled']).strimzi?.answer, 'deny-429');
    assert.equal(
      profiles(['-reschedule.strimzi.enabled', '-reschedule.strimzi.deny-code=500']).strimzi?.answer,
      'deny-500',
    );
  });

  it('the flags profile, the Strimzi profile and a file together; an overlapping file profile is a startup error', () => {
    const path = file(
      'profiles:\n- name: es\n  podSelector: common.k8s.elastic.co/type=elasticsearch\n  annotation: example.com/move=true\n',
    );
    const read = profiles(['-reschedule.enabled', '-reschedule.strimzi.enabled', `-reschedule.profiles-file=${path}`]);
    assert.deepEqual(
      read.profiles.map((p) => p.name),
      [undefined, 'strimzi', 'es'],
    );
    const clash = file(
      'profiles:\n- name: cb-data\n  podSelector: app=couchbase,tier=data\n  annotation: example.com/move=true\n',
    );
    assert.match(
      errors(['-reschedule.enabled', `-reschedule.profiles-file=${clash}`]),
      /the -reschedule\.\* flags profile .* and profile "cb-data" .* overlap: both can select one pod through label "app"/,
    );
  });

  it('clear errors for a missing file, a bad file, a bad deny code and a Strimzi profile that drains nothing', () => {
    assert.match(
      errors(['-reschedule.profiles-file=/nonexistent/profiles.yaml']),
      /-reschedule\.profiles-file \/nonexistent\/profiles\.yaml: cannot read it/,
    );
    assert.match(errors([`-reschedule.profiles-file=${file('profiles: {')}`]), /profiles\.yaml: not YAML/);
    assert.match(errors(['-reschedule.strimzi.enabled', '-reschedule.strimzi.deny-code=503']), /expected 429 or 500/);
    assert.match(
      errors([], { STRIMZI_DRAIN_KAFKA: 'false', STRIMZI_DRAIN_ZOOKEEPER: 'false' }),
      /drains neither Kafka nor ZooKeeper/,
    );
  });
});
