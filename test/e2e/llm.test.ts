/**
 * POST /v1/llm/complete through the gateway, over real HTTP: a budget per
 * tenant (the API key's owner) reserved before the call and settled after it.
 * This file's budget: 1000 µUSD refilled 500 per second; globex's (the
 * partner key's tenant) refills 1 per hour, so its balance is exact.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as wait } from 'node:timers/promises';
import { FakeProvider, type LlmProvider } from '../../functions/llm/provider.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

let platform: TestPlatform;
before(async () => {
  platform = await consumers({
    parameters: {
      '/ratelimit/local/overrides/llm-budget': { capacity: 1000, refill: { tokens: 1000, every: '2 s' } },
      '/ratelimit/local/overrides/llm-budget/globex': { refill: { tokens: 1, every: '1 h' } },
      '/ratelimit/local/overrides/llm-in-flight/globex': { limit: 2 },
    },
  });
});
after(() => platform.close());

const complete = (apiKey: string, body: unknown) =>
  call(platform.base, {
    method: 'POST',
    path: '/v1/llm/complete',
    from: loopbackAddress(),
    headers: { 'x-api-key': apiKey },
    body: JSON.stringify(body),
  });

const remaining = (header: string | undefined) => Number(/r=(-?\d+)/.exec(header ?? '')?.[1]);

describe('LLM calls against a cost budget (POST /v1/llm/complete)', () => {
  it('reserves the estimate, settles the actual cost, and answers with the budget headers', async () => {
    const answer = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'fake-small',
      prompt: 'a'.repeat(40),
      max_tokens: 100,
    });
    assert.equal(answer.status, 200, answer.body);
    // 10 prompt tokens × 1 + 100 × 3 reserved; 10 × 1 + 5 completion tokens × 3 spent
    assert.deepEqual(answer.json().cost, { reservedMicroUsd: 310, actualMicroUsd: 25 });
    assert.equal(answer.headers['ratelimit-policy'], '"llm-budget";q=1000;w=3600000');
    assert.equal(remaining(answer.headers.ratelimit), 1000 - 25);
  });

  it('refunds the reservation when the provider fails', async () => {
    const before = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'fake-small',
      prompt: 'b'.repeat(40),
      max_tokens: 100,
    });
    const failed = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'fake-small',
      prompt: '[fail] c',
      max_tokens: 100,
    });
    assert.equal(failed.status, 502);
    assert.equal(failed.json().error, 'provider_failed');
    assert.equal(remaining(failed.headers.ratelimit), remaining(before.headers.ratelimit), 'nothing was charged');
  });

  it('refuses a call the budget cannot cover with 429, and waiting its Retry-After admits it', async () => {
    const request = { model: 'fake-small', prompt: `[long] ${'d'.repeat(33)}`, max_tokens: 290 };
    const first = await complete('rk_localDemoStandardKeyNotASecret00', request);
    assert.equal(first.status, 200, first.body);
    const refused = await complete('rk_localDemoStandardKeyNotASecret00', request);
    assert.equal(refused.status, 429);
    assert.equal(refused.json().policy, 'llm-budget');
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 2, `Retry-After ${retryAfter}`);
    await wait(retryAfter * 1000); // the answer's own Retry-After
    assert.equal((await complete('rk_localDemoStandardKeyNotASecret00', request)).status, 200);
  });

  it('answers 400 with a reason for an unknown model, a bad max_tokens or a call dearer than the whole budget', async () => {
    assert.equal(
      (await complete('rk_localDemoPartnerKeyNotASecret000', { model: 'gpt-x', prompt: 'x', max_tokens: 1 })).status,
      400,
    );
    const proto = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: '__proto__',
      prompt: 'x',
      max_tokens: 1,
    });
    assert.equal(proto.json().message, 'model must be one of fake-small, fake-large', 'no price from Object.prototype');
    assert.equal(
      (await complete('rk_localDemoPartnerKeyNotASecret000', { model: 'fake-small', prompt: 'x', max_tokens: 0 }))
        .status,
      400,
    );
    const dear = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'fake-large',
      prompt: 'x',
      max_tokens: 4000,
    });
    assert.equal(dear.status, 400);
    assert.equal(dear.json().error, 'over_budget_capacity');
    assert.equal((await complete('nobody', { model: 'fake-small', prompt: 'x', max_tokens: 1 })).status, 401);
  });
});

describe('LLM calls against an in-flight limit beside the budget (globex: 2 at once)', () => {
  /** A provider that holds every call until the gate opens, counting the calls it holds. */
  function gatedProvider() {
    let open: () => void = () => {};
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    const state = { waiting: 0 };
    const provider: LlmProvider = {
      async complete(request) {
        state.waiting++;
        await opened;
        return new FakeProvider().complete(request);
      },
    };
    return { provider, state, open };
  }
  // imported after the platform's settings are in the environment (before()): it makes the platform
  const useProvider = async (provider: LlmProvider) =>
    (await import('../../functions/llm/handler.ts')).useProvider(provider);
  after(() => useProvider(new FakeProvider()));
  /** Two calls of the partner, sent at once; resolves once the gated provider holds both (their slots taken). */
  async function twoHeld(gate: ReturnType<typeof gatedProvider>, body: unknown) {
    const running = [
      complete('rk_localDemoPartnerKeyNotASecret000', body),
      complete('rk_localDemoPartnerKeyNotASecret000', body),
    ];
    const held = (async () => {
      while (gate.state.waiting < 2) await new Promise((resolve) => setImmediate(resolve));
    })();
    await Promise.race([
      held,
      Promise.all(running).then((answers) =>
        assert.fail(`answered before the gate opened: ${answers.map((a) => a.body)}`),
      ),
    ]);
    return running;
  }

  it('refuses a third call while two run (429 from llm-in-flight), and admits again once they finish', async () => {
    const gate = gatedProvider();
    await useProvider(gate.provider);
    const small = { model: 'fake-small', prompt: 'e'.repeat(8), max_tokens: 2 };
    const running = await twoHeld(gate, small);
    const third = await complete('rk_localDemoPartnerKeyNotASecret000', small);
    assert.equal(third.status, 429, third.body);
    assert.equal(third.json().policy, 'llm-in-flight');
    assert.ok(Number(third.headers['retry-after']) >= 1, 'a Retry-After: at the latest when the oldest lease lapses');
    gate.open();
    for (const answer of await Promise.all(running)) assert.equal(answer.status, 200, answer.body);
    await useProvider(new FakeProvider());
    assert.equal(
      (await complete('rk_localDemoPartnerKeyNotASecret000', small)).status,
      200,
      'both slots were given back',
    );
  });

  it('gives the slot back when the budget refuses the call: both limits, or neither', async () => {
    await useProvider(new FakeProvider());
    const dear = { model: 'fake-small', prompt: 'f'.repeat(8), max_tokens: 330 }; // 1000 µUSD: more than is left
    for (let i = 0; i < 3; i++) {
      const refused = await complete('rk_localDemoPartnerKeyNotASecret000', dear);
      assert.equal(refused.status, 429, refused.body);
      assert.equal(refused.json().policy, 'llm-budget');
    }
    const gate = gatedProvider();
    await useProvider(gate.provider);
    const small = { model: 'fake-small', prompt: 'g'.repeat(8), max_tokens: 2 };
    const running = await twoHeld(gate, small);
    gate.open();
    for (const answer of await Promise.all(running)) assert.equal(answer.status, 200, 'no slot was kept by a refusal');
  });
});
