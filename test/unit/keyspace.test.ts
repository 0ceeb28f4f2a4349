/**
 * The keyspace (config/redis-roles.ts, from the layer's layer/src/redis/keyspace.ts) is the one list the ACL users are built
 * from: every command a Lua script calls must be in the functions' user's
 * rules (Redis checks commands inside scripts against the caller's ACL), and
 * so must every command the layer's and the functions' TypeScript sends (a
 * review found the rebalancer's ZCOUNT refused: every pass over a full
 * demand page failed); every key the platform writes must fall under a family's prefix.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { compilePolicy, InvalidCheckError, stateKeysOf } from '@platform/rate-limit';
import { counterKey } from '@platform/rate-limit/policy';
import { grantsKey, ringKey } from '@platform/rate-limit/regions';
import {
  FUNCTIONS_COMMANDS,
  functionsAclRules,
  KEY_FAMILIES,
  keyPatterns,
  OPERATOR_COMMANDS,
} from '../../config/redis-roles.ts';
import { commandsSentFrom, type SentCommand } from '../support/sent-commands.ts';

const LUA = new URL('../../lua/', import.meta.url);

/** lua/'s scripts, and the layer's and the functions' TypeScript (the harvester holds a lease script of its own). */
function luaSources(): string[] {
  const files = [
    ...readdirSync(LUA).filter((f) => f.endsWith('.lua')),
    ...readdirSync(new URL('lib/', LUA)).map((f) => `lib/${f}`),
  ];
  const typescript = ['../layer/src/', '../functions/'].flatMap((dir) =>
    readdirSync(new URL(dir, LUA), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `${dir}${f}`),
  );
  return [...files, ...typescript].map((f) => readFileSync(new URL(f, LUA), 'utf8'));
}

/** The sends a user's commands refuse: a container's subcommand is allowed by name (`script|load`). */
function refused(sent: readonly SentCommand[], commands: readonly string[]): string[] {
  const allowed = new Set<string>(commands);
  return sent
    .filter((s) => !allowed.has(s.command) && !allowed.has(`${s.command}|${s.subcommand}`))
    .map((s) => `${s.command} at ${s.at}`);
}

describe('The keyspace and the ACL rules built from it', () => {
  it('allows the functions user every command the Lua scripts call', () => {
    const called = new Set(
      luaSources().flatMap((source) =>
        [...source.matchAll(/redis\.call\('([A-Z_]+)'/g)].map((m) => (m[1] as string).toLowerCase()),
      ),
    );
    assert.ok(called.size >= 10 && called.has('incr'), `found ${[...called].join(' ')}`);
    const allowed = new Set<string>(FUNCTIONS_COMMANDS);
    assert.deepEqual(
      [...called].filter((c) => !allowed.has(c)),
      [],
      'commands a script calls that the ACL would refuse',
    );
  });

  it('allows the functions user every command the TypeScript of the layer and the functions sends, the operator every one the CLI sends', () => {
    const sent = commandsSentFrom(['layer/src', 'functions', 'cli']);
    const cli = sent.filter((s) => s.at.startsWith('cli/'));
    const functions = sent.filter((s) => !s.at.startsWith('cli/'));
    // found on whatever the client is called: the rebalancer's redis, the demand pipeline, guardedRedis's client
    const found = (sends: readonly SentCommand[]) => new Set(sends.map((s) => s.command));
    for (const command of ['evalsha', 'zcount', 'zremrangebyscore', 'get'])
      assert.ok(found(functions).has(command), command);
    assert.ok(found(cli).has('pttl'));
    assert.deepEqual(refused(functions, FUNCTIONS_COMMANDS), [], "commands the functions' user would refuse (NOPERM)");
    assert.deepEqual(refused(cli, OPERATOR_COMMANDS), [], "commands the operator's user would refuse (NOPERM)");
  });

  it('gives every key family a prefix of its own, and the users no key outside them', () => {
    const prefixes = Object.values(KEY_FAMILIES);
    assert.equal(new Set(prefixes).size, prefixes.length);
    for (const a of prefixes) for (const b of prefixes) if (a !== b) assert.ok(!a.startsWith(b), `${a} inside ${b}`);
    assert.deepEqual(keyPatterns(), ['~rl:*', '~wh:*', '~hv:*', '~ak:*']);
    const rules = functionsAclRules();
    assert.ok(
      rules.includes('-@all') && rules.indexOf('-@all') < rules.indexOf('+evalsha'),
      'nothing but what is listed',
    );
    assert.ok(!rules.some((r) => r === '~*' || r === 'allkeys' || r.startsWith('+@')), rules.join(' '));
    assert.ok(OPERATOR_COMMANDS.every((c) => !/flushall|config|keys|debug/.test(c)));
  });

  it('builds counters under the counters family, grouped or not', () => {
    const solo = compilePolicy('solo', { strategy: 'slidingWindow', limit: 1, window: '1 m' });
    const grouped = compilePolicy('g-ip', { strategy: 'slidingWindow', limit: 1, window: '1 m', group: 'g' });
    assert.ok(counterKey(solo, 'k').startsWith(KEY_FAMILIES.counters));
    assert.ok(counterKey(grouped, 'k', 'scope').startsWith(KEY_FAMILIES.counters));
  });

  it("never names one key's counter as another key's state: a grouped key may not end in a state key's suffix", () => {
    const budget = compilePolicy('b', {
      strategy: 'tokenBucket',
      capacity: 10,
      refill: { tokens: 1, every: '1 s' },
      group: 'g',
    });
    const counter = counterKey(budget, 'K', 'T');
    for (const state of stateKeysOf(budget, counter).slice(1)) {
      const suffix = state.slice(counter.length); // ':holds', ':amounts', …
      assert.throws(() => counterKey(budget, `K${suffix}`, 'T'), InvalidCheckError, suffix);
    }
    assert.throws(() => counterKey(budget, 'K:rate', 'T'), InvalidCheckError);
    // nor a region's grants: key K:grants's ring (counter@region) would be key K's grants (counter:grants@region)
    const shares = compilePolicy('ip', {
      strategy: 'slidingWindow',
      limit: 4,
      window: '1 m',
      group: 'g',
      regions: 'shares',
    });
    assert.throws(() => ringKey(counterKey(shares, 'K:grants', 'T'), 'eu'), InvalidCheckError);
    assert.equal(grantsKey(counterKey(shares, 'K', 'T'), 'eu'), 'rl:{g:T}:ip:K:grants@eu');
    // the same words elsewhere in a key, or in an ungrouped key (whose suffixes sit outside its braces), are fine
    assert.equal(counterKey(budget, 'holds:K', 'T'), 'rl:{g:T}:b:holds:K');
    assert.equal(
      counterKey(compilePolicy('s', { strategy: 'slidingWindow', limit: 1, window: '1 m' }), 'K:holds'),
      'rl:{s:K:holds}',
    );
  });
});
