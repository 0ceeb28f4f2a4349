/**
 * POST /v1/llm/complete through the gateway, over real HTTP (and, where the
 * invocation's remaining time matters, its handler called as Lambda would,
 * with a short remaining time): a budget per tenant (the API key's owner)
 * reserved before the call and settled after it, and an in-flight limit.
 * This file's budget: 1000 µUSD refilled 500 per second; globex's (the
 * partner key's tenant) refills 1 per hour, so its balance is exact.
 * Prices (config/llm-models.json): nova-lite 0.06 µUSD per input token, 0.24
 * per output token; nova-pro 0.80 and 3.20. An estimate counts the prompt's
 * UTF-8 bytes + 64 template tokens.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as wait } from 'node:timers/promises';
import type { Context } from 'aws-lambda';
import { FakeProvider, type LlmProvider, ProviderError } from '../../functions/llm/provider.ts';
import { consumers, type TestPlatform } from '../support/consumers.ts';
import { call, loopbackAddress } from '../support/http.ts';

let platform: TestPlatform;
before(async () => {
  platform = await consumers({
    parameters: {
      '/ratelimit/local/overrides/llm-budget': { capacity: 1000, refill: { tokens: 1000, every: '2 s' } },
      '/ratelimit/local/overrides/llm-budget/globex': { refill: { tokens: 1, every: '1 h' } },
      '/ratelimit/local/overrides/llm-in-flight/globex': { limit: 2 },
      // an operator's overrides that a call must not outlive (acme's and initech's keys are the standard and premium ones)
      '/ratelimit/local/overrides/llm-in-flight/acme': { leaseTtl: '3 s' },
      '/ratelimit/local/overrides/llm-budget/initech': { reservation: { hold: '3 s', remember: '15 m' } },
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
      model: 'nova-lite',
      prompt: 'a'.repeat(40),
      max_tokens: 100,
    });
    assert.equal(answer.status, 200, answer.body);
    // (40 + 64) × 0.06 + 100 × 0.24 = 30.24 reserved; 40 × 0.06 + 20 output tokens × 0.24 = 7.2 spent
    assert.deepEqual(answer.json().cost, { reservedMicroUsd: 31, actualMicroUsd: 8, chargedMicroUsd: 8 });
    assert.deepEqual(answer.json().usage, {
      inputTokens: 40,
      outputTokens: 20,
      cacheReadInputTokens: 0,
      cacheWriteInputTokens: 0,
    });
    assert.equal(answer.headers['ratelimit-policy'], '"llm-budget";q=1000;w=3600000');
    assert.equal(remaining(answer.headers.ratelimit), 1000 - 8);
  });

  it('refunds the reservation when the provider refused the call before any work', async () => {
    const before = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'nova-lite',
      prompt: 'b'.repeat(40),
      max_tokens: 100,
    });
    const failed = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'nova-lite',
      prompt: '[fail] c',
      max_tokens: 100,
    });
    assert.equal(failed.status, 502);
    assert.equal(failed.json().error, 'provider_failed');
    assert.deepEqual(failed.json().cost, { reservedMicroUsd: 29, chargedMicroUsd: 0 }); // (8 + 64) × 0.06 + 100 × 0.24
    assert.equal(remaining(failed.headers.ratelimit), remaining(before.headers.ratelimit), 'nothing was charged');
  });

  it('charges a provider failure after tokens were produced what it produced', async () => {
    const before = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'nova-lite',
      prompt: 'b'.repeat(40),
      max_tokens: 100,
    });
    const prompt = '[fail-after:50] x'; // 17 bytes; 50 output tokens produced, then the provider failed
    const failed = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'nova-lite',
      prompt,
      max_tokens: 100,
    });
    assert.equal(failed.status, 502, failed.body);
    // 17 × 0.06 + 50 × 0.24 = 13.02 µUSD, rounded up
    assert.deepEqual(failed.json().cost, { reservedMicroUsd: 29, chargedMicroUsd: 14 });
    assert.equal(
      remaining(failed.headers.ratelimit),
      remaining(before.headers.ratelimit) - 14,
      'charged, not refunded',
    );
  });

  it('refuses a call the budget cannot cover with 429, and waiting its Retry-After admits it', async () => {
    // (40 + 64) × 0.06 + 4096 × 0.24 = 989.28 reserved of 1000: a second cannot fit until ~2 s refilled
    const request = { model: 'nova-lite', prompt: `[long] ${'d'.repeat(33)}`, max_tokens: 4096 };
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
    assert.equal(proto.json().message, 'model must be one of nova-lite, nova-pro', 'no price from Object.prototype');
    const none = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'nova-lite',
      prompt: 'x',
      max_tokens: 0,
    });
    assert.equal(none.status, 400);
    // the bound is said whichever side is out: the largest of each model
    assert.match(
      String(none.json().message),
      /^max_tokens must be a whole number from 1 to the model's largest \(.*nova-lite: 4096/,
    );
    const tooMany = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'nova-lite',
      prompt: 'x',
      max_tokens: 4097,
    });
    assert.equal(tooMany.json().message, 'max_tokens must be a whole number from 1 to 4096');
    const dear = await complete('rk_localDemoPartnerKeyNotASecret000', {
      model: 'nova-pro',
      prompt: 'x',
      max_tokens: 4000,
    });
    assert.equal(dear.status, 400);
    assert.equal(dear.json().error, 'over_budget_capacity');
    assert.equal((await complete('nobody', { model: 'nova-lite', prompt: 'x', max_tokens: 1 })).status, 401);
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
    const small = { model: 'nova-lite', prompt: 'e'.repeat(8), max_tokens: 2 };
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
    const dear = { model: 'nova-lite', prompt: 'f'.repeat(8), max_tokens: 4096 }; // 988 µUSD: more than is left (975)
    for (let i = 0; i < 3; i++) {
      const refused = await complete('rk_localDemoPartnerKeyNotASecret000', dear);
      assert.equal(refused.status, 429, refused.body);
      assert.equal(refused.json().policy, 'llm-budget');
    }
    const gate = gatedProvider();
    await useProvider(gate.provider);
    const small = { model: 'nova-lite', prompt: 'g'.repeat(8), max_tokens: 2 };
    const running = await twoHeld(gate, small);
    gate.open();
    for (const answer of await Promise.all(running)) assert.equal(answer.status, 200, 'no slot was kept by a refusal');
  });
});

describe('LLM calls bounded by the invocation (globex: 2 at once; its handler called with a short remaining time)', () => {
  const handlerModule = () => import('../../functions/llm/handler.ts');
  after(async () => (await handlerModule()).useProvider(new FakeProvider()));

  /**
   * One invocation as Lambda makes it: `remainingMs` left before its timeout, of a request API Gateway took at
   * `received` (ms since the epoch), with `apiKey` (globex's unless named).
   */
  async function invoke(
    body: unknown,
    remainingMs: number,
    { received = Date.now(), apiKey = 'rk_localDemoPartnerKeyNotASecret000' } = {},
  ) {
    const { handler } = await handlerModule();
    const deadline = Date.now() + remainingMs;
    const event = {
      resource: '/v1/llm/complete',
      path: '/v1/llm/complete',
      httpMethod: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      multiValueHeaders: {},
      queryStringParameters: null,
      multiValueQueryStringParameters: null,
      pathParameters: null,
      stageVariables: null,
      body: JSON.stringify(body),
      isBase64Encoded: false,
      requestContext: {
        requestId: randomUUID(),
        identity: { sourceIp: loopbackAddress() },
        stage: 'local',
        requestTimeEpoch: received,
      },
    };
    const context = {
      functionName: 'llm',
      awsRequestId: randomUUID(),
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    } as unknown as Context;
    const answer = (await (handler as unknown as (e: unknown, c: Context) => Promise<unknown>)(event, context)) as {
      statusCode: number;
      headers: Record<string, string>;
      body: string;
    };
    return { ...answer, json: () => JSON.parse(answer.body) };
  }

  it('says the estimate was charged when Redis could not take the settle (its hold lapses charged)', async (t) => {
    const { platform } = await import('../../functions/shared/platform.ts');
    const { limiter } = platform();
    const { useProvider } = await handlerModule();
    const settleInFlight = limiter.settleInFlight;
    limiter.settleInFlight = async () => ({ decided: false, reason: 'timeout' });
    t.after(() => {
      limiter.settleInFlight = settleInFlight;
    });
    const request = { model: 'nova-lite', prompt: 'u'.repeat(8), max_tokens: 2 }; // 72 × 0.06 + 2 × 0.24 → 5
    const answered = await invoke(request, 10_000);
    assert.equal(answered.statusCode, 200, answered.body);
    assert.deepEqual(answered.json().cost, { reservedMicroUsd: 5, actualMicroUsd: 1, chargedMicroUsd: 5 });
    useProvider({
      async complete() {
        throw new ProviderError('refused', { kind: 'nothing' }); // refused before any work: meant to cost 0
      },
    });
    const refused = await invoke(request, 10_000);
    assert.equal(refused.statusCode, 502, refused.body);
    assert.deepEqual(refused.json().cost, { reservedMicroUsd: 5, chargedMicroUsd: 5 });
    assert.match(refused.json().message, /5 µUSD \(the estimate: its settle could not be recorded\) was charged/);
    useProvider(new FakeProvider());
  });

  it('aborts a call outliving the invocation, charges its estimate, and never runs more than 2 at once', async (t) => {
    const { ABORT_MARGIN_MS, useProvider } = await handlerModule();
    // Prepare: a provider that honours the abort, taking 50 ms to stop, and counts the calls really running
    const state = { running: 0, most: 0, ran: 0, abortedBeforeStop: 0 };
    useProvider({
      async complete(request) {
        state.running++;
        state.ran++;
        state.most = Math.max(state.most, state.running);
        await new Promise((resolve) => request.signal.addEventListener('abort', resolve, { once: true }));
        await wait(50); // stopping takes a while: the slot must stay taken meanwhile
        state.abortedBeforeStop++;
        state.running--;
        throw new ProviderError('aborted', { kind: 'unknown' });
      },
    });
    const request = { model: 'nova-lite', prompt: 'h'.repeat(8), max_tokens: 2 }; // 72 × 0.06 + 2 × 0.24 = 4.8 → 5
    // Act: 3 waves of 6 invocations, each wave sent while the last one's calls are stopping
    const answers: Awaited<ReturnType<typeof invoke>>[] = [];
    const waves: Promise<void>[] = [];
    for (let wave = 0; wave < 3; wave++) {
      waves.push(
        Promise.all(Array.from({ length: 6 }, () => invoke(request, ABORT_MARGIN_MS + 200))).then((a) => {
          answers.push(...a);
        }),
      );
      await wait(230); // about when the previous wave's calls are aborted and stopping
    }
    await Promise.all(waves);
    // Assess
    const statuses = answers.map((a) => a.statusCode);
    t.diagnostic(`statuses ${JSON.stringify(statuses)}; ${state.ran} calls ran, at most ${state.most} at once`);
    assert.ok(state.most <= 2, `${state.most} provider calls ran at once for a tenant allowed 2`);
    assert.ok(state.ran >= 2, 'calls ran');
    const timedOut = answers.filter((a) => a.statusCode === 504);
    assert.equal(timedOut.length, state.ran, 'every call that ran was aborted and answered 504');
    for (const a of timedOut) assert.deepEqual(a.json().cost, { reservedMicroUsd: 5, chargedMicroUsd: 5 });
    for (const a of answers.filter((x) => x.statusCode !== 504)) {
      assert.equal(a.statusCode, 429);
      assert.equal(a.json().policy, 'llm-in-flight');
    }
    assert.equal(state.running, 0);
  });

  /** A provider that runs until aborted, and says when that was (ms since the epoch). */
  function untilAborted() {
    const aborts: number[] = [];
    const provider: LlmProvider = {
      async complete(request) {
        await new Promise((resolve) => request.signal.addEventListener('abort', resolve, { once: true }));
        aborts.push(Date.now());
        throw new ProviderError('aborted', { kind: 'unknown' });
      },
    };
    return { provider, aborts };
  }

  it("ends a call before API Gateway's timeout, answered with its cost, though the invocation has longer", {
    timeout: 20_000,
  }, async () => {
    const { ABORT_MARGIN_MS, useProvider } = await handlerModule();
    const { GATEWAY_TIMEOUT_MS } = await import('../../functions/route.ts');
    const { provider, aborts } = untilAborted();
    useProvider(provider);
    // the gateway took the request a while ago (a slow authorizer, a cold start): ~1 s of its timeout is left
    const received = Date.now() - (GATEWAY_TIMEOUT_MS - ABORT_MARGIN_MS - 1000);
    const request = { model: 'nova-lite', prompt: 'g'.repeat(8), max_tokens: 2 };
    const answer = await invoke(request, 60_000, { received });
    useProvider(new FakeProvider());
    assert.equal(answer.statusCode, 504, answer.body);
    assert.equal(answer.json().error, 'provider_timeout');
    assert.deepEqual(answer.json().cost, { reservedMicroUsd: 5, chargedMicroUsd: 5 });
    assert.equal(aborts.length, 1);
    assert.ok(
      (aborts[0] as number) < received + GATEWAY_TIMEOUT_MS,
      'aborted before the gateway gave up on the caller, not at the invocation`s end',
    );
  });

  for (const [tenant, apiKey, what] of [
    ['acme', 'rk_localDemoStandardKeyNotASecret00', "its slot's lease"],
    ['initech', 'rk_localDemoPremiumKeyNotASecret000', "its reservation's hold"],
  ] as const) {
    it(`never runs a call on past ${what}, which an override shortened to 3 s (${tenant})`, {
      timeout: 20_000,
    }, async () => {
      const { useProvider } = await handlerModule();
      const { provider, aborts } = untilAborted();
      useProvider(provider);
      const asked = Date.now();
      const answer = await invoke({ model: 'nova-lite', prompt: 'l'.repeat(8), max_tokens: 2 }, 60_000, { apiKey });
      useProvider(new FakeProvider());
      assert.equal(answer.statusCode, 504, answer.body);
      assert.equal(aborts.length, 1);
      assert.ok((aborts[0] as number) < asked + 3000, `aborted ${(aborts[0] as number) - asked} ms in, past ${what}`);
    });
  }

  it('keeps the slot of a call that does not stop at its abort: the tenant still runs at most 2', async () => {
    const { ABORT_MARGIN_MS, useProvider } = await handlerModule();
    // Prepare: a provider that ignores the abort and never returns (the last test of this file: its slots stay taken)
    let started = 0;
    useProvider({
      complete() {
        started++;
        return new Promise(() => undefined);
      },
    });
    const request = { model: 'nova-lite', prompt: 'i'.repeat(8), max_tokens: 2 };
    // Act: two invocations run out of time
    const stuck = await Promise.all([invoke(request, ABORT_MARGIN_MS + 100), invoke(request, ABORT_MARGIN_MS + 100)]);
    // Assess: answered 504 and charged the estimate, but their calls may still run, so their slots are kept
    for (const a of stuck) {
      assert.equal(a.statusCode, 504, a.body);
      assert.equal(a.json().cost.chargedMicroUsd, 5);
    }
    const third = await invoke(request, 10_000);
    assert.equal(third.statusCode, 429, third.body);
    assert.equal(third.json().policy, 'llm-in-flight');
    assert.equal(started, 2, 'the third call never reached the provider');
  });
});
