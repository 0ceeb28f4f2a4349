/**
 * The LLM route's provider and prices: Bedrock's Converse through
 * aws-sdk-client-mock (success with usage and cache tokens, throttling, a
 * validation error, model and server errors after the request was sent), a
 * real abort of a call to a local endpoint that never answers, the LLM_PROVIDER
 * setting, and the reservation as an upper bound of any answer's cost.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ModelErrorException,
  ThrottlingException,
  ValidationException,
} from '@aws-sdk/client-bedrock-runtime';
import { InvalidSettingError } from '@platform/rate-limit';
import { mockClient } from 'aws-sdk-client-mock';
import fc from 'fast-check';
import { inferenceProfileIdOf } from '../../config/bedrock-profiles.ts';
import { BedrockProvider, bedrockClient } from '../../functions/llm/bedrock.ts';
import { costOf, MODELS, type ModelEntry, promptTokenBound, reservationOf } from '../../functions/llm/models.ts';
import { ProviderError } from '../../functions/llm/provider.ts';
import { readLlmProvider } from '../../functions/shared/settings.ts';

const lite = MODELS['nova-lite'] as ModelEntry;
const request = (signal = new AbortController().signal) => ({
  model: 'nova-lite',
  bedrockModelId: lite.bedrockModelId,
  prompt: 'Say hello',
  maxTokens: 50,
  signal,
});
const meta = { httpStatusCode: 400, $metadata: {} };

/** What a provider call rejected with: a ProviderError, or the test fails. */
async function failure(call: Promise<unknown>): Promise<ProviderError> {
  const error = await call.then(
    () => assert.fail('the call succeeded'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ProviderError, String(error));
  return error;
}

describe('Class: BedrockProvider', () => {
  it('calls Converse with the model id, the prompt and max_tokens, and answers the text and the whole usage', async (t) => {
    const bedrock = mockClient(BedrockRuntimeClient);
    t.after(() => bedrock.restore()); // also when an assertion fails: a mock left in place hangs the next test
    bedrock.on(ConverseCommand).resolves({
      output: { message: { role: 'assistant', content: [{ text: 'Hello' }, { text: '!' }] } },
      stopReason: 'end_turn',
      usage: {
        inputTokens: 12,
        outputTokens: 3,
        totalTokens: 1215,
        cacheReadInputTokens: 1000,
        cacheWriteInputTokens: 200,
      },
      metrics: { latencyMs: 300 },
    });
    const completion = await new BedrockProvider(new BedrockRuntimeClient({ region: 'us-east-1' })).complete(request());
    const sent = bedrock.commandCalls(ConverseCommand)[0]?.args[0].input;
    assert.equal(sent?.modelId, 'us.amazon.nova-lite-v1:0', "the client's region's inference profile");
    assert.deepEqual(sent?.messages, [{ role: 'user', content: [{ text: 'Say hello' }] }]);
    assert.deepEqual(sent?.inferenceConfig, { maxTokens: 50 });
    assert.equal(completion.text, 'Hello!');
    assert.deepEqual(completion.usage, {
      inputTokens: 12,
      outputTokens: 3,
      cacheReadInputTokens: 1000,
      cacheWriteInputTokens: 200,
    });
    // 12 × 0.06 + 3 × 0.24 + 1000 × 0.015 + 200 × 0.06 µUSD = 28.44, rounded up
    assert.equal(costOf(lite, completion.usage), 29);
  });

  it("invokes each region's geography's inference profile, and refuses a region outside every geography unsent", async (t) => {
    const bedrock = mockClient(BedrockRuntimeClient);
    t.after(() => bedrock.restore());
    bedrock.on(ConverseCommand).resolves({
      output: { message: { role: 'assistant', content: [{ text: 'Hi' }] } },
      usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
    });
    for (const [region, id] of [
      ['eu-west-1', 'eu.amazon.nova-lite-v1:0'],
      ['ap-southeast-2', 'apac.amazon.nova-lite-v1:0'],
      ['us-gov-west-1', 'us-gov.amazon.nova-lite-v1:0'],
    ]) {
      await new BedrockProvider(new BedrockRuntimeClient({ region })).complete(request());
      assert.equal(bedrock.commandCalls(ConverseCommand).at(-1)?.args[0].input.modelId, id, region);
    }
    const sent = bedrock.commandCalls(ConverseCommand).length;
    const outside = await failure(
      new BedrockProvider(new BedrockRuntimeClient({ region: 'sa-east-1' })).complete(request()),
    );
    assert.deepEqual(outside.spent, { kind: 'nothing' });
    assert.equal(bedrock.commandCalls(ConverseCommand).length, sent, 'nothing sent');
    assert.throws(
      () => inferenceProfileIdOf('amazon.nova-lite-v1:0', 'sa-east-1'),
      /no Bedrock cross-region inference geography for region sa-east-1/,
    );
  });

  it('says a throttled or invalid call spent nothing (it is refunded), the throttling as such', async (t) => {
    const bedrock = mockClient(BedrockRuntimeClient);
    t.after(() => bedrock.restore()); // also when an assertion fails: a mock left in place hangs the next test
    const provider = new BedrockProvider(new BedrockRuntimeClient({ region: 'us-east-1' }));
    bedrock.on(ConverseCommand).rejects(new ThrottlingException({ message: 'Too many requests', ...meta }));
    const throttled = await failure(provider.complete(request()));
    assert.deepEqual(throttled.spent, { kind: 'nothing' });
    assert.equal(throttled.throttled, true);
    bedrock.on(ConverseCommand).rejects(new ValidationException({ message: 'bad input', ...meta }));
    const invalid = await failure(provider.complete(request()));
    assert.deepEqual(invalid.spent, { kind: 'nothing' });
    assert.equal(invalid.throttled, false);
  });

  it('says a model or server error after the request was sent may have produced tokens (the estimate stays charged)', async (t) => {
    const bedrock = mockClient(BedrockRuntimeClient);
    t.after(() => bedrock.restore()); // also when an assertion fails: a mock left in place hangs the next test
    const provider = new BedrockProvider(new BedrockRuntimeClient({ region: 'us-east-1' }));
    bedrock.on(ConverseCommand).rejects(new ModelErrorException({ message: 'model failed', ...meta }));
    assert.deepEqual((await failure(provider.complete(request()))).spent, { kind: 'unknown' });
    bedrock.on(ConverseCommand).rejects(Object.assign(new Error('socket hang up'), { name: 'TimeoutError' }));
    assert.deepEqual((await failure(provider.complete(request()))).spent, { kind: 'unknown' });
    bedrock.on(ConverseCommand).resolves({ output: { message: { role: 'assistant', content: [{ text: 'x' }] } } });
    assert.deepEqual((await failure(provider.complete(request()))).spent, { kind: 'unknown' }, 'no usage: unknown');
    // a usage that leaves out (or garbles) its input or output tokens is no usage: not 0 tokens
    for (const usage of [{ inputTokens: 12 }, { outputTokens: 7 }, { inputTokens: 12, outputTokens: -1 }]) {
      bedrock.on(ConverseCommand).resolves({
        output: { message: { role: 'assistant', content: [{ text: 'x' }] } },
        usage: usage as never,
      });
      assert.deepEqual((await failure(provider.complete(request()))).spent, { kind: 'unknown' }, JSON.stringify(usage));
    }
  });

  it('stops waiting at the abort: a call to an endpoint that never answers rejects, sent once, spent unknown', async (t) => {
    // Prepare: a TCP endpoint that takes the request and never answers
    const sockets: Socket[] = [];
    const server = createServer((socket) => {
      sockets.push(socket);
      socket.on('data', () => undefined);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    const client = await bedrockClient(60_000, {
      region: 'us-east-1',
      endpoint: `http://127.0.0.1:${port}`,
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' },
    });
    t.after(() => {
      for (const socket of sockets) socket.destroy();
      server.close();
      client.destroy();
    });
    const abort = new AbortController();
    // Act: the call is sent, then aborted
    const call = new BedrockProvider(client).complete(request(abort.signal));
    while (sockets.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    abort.abort();
    const error = await failure(call);
    // Assess: it rejected (before the endpoint ever answered) as sent-and-unknown, after one attempt
    assert.deepEqual(error.spent, { kind: 'unknown' });
    assert.equal((error.cause as Error).name, 'AbortError');
    assert.equal(sockets.length, 1, 'one attempt: an aborted call is not retried');
  });
});

describe('Class: BedrockProvider, made from a client factory', () => {
  it('makes its client at the first call, not when built, and once', async (t) => {
    // Prepare: a factory that counts the clients it makes
    const bedrock = mockClient(BedrockRuntimeClient);
    bedrock.on(ConverseCommand).resolves({
      output: { message: { role: 'assistant', content: [{ text: 'hi' }] } },
      usage: { inputTokens: 3, outputTokens: 1, totalTokens: 4 },
      stopReason: 'end_turn',
      metrics: { latencyMs: 1 },
    });
    t.after(() => bedrock.restore());
    let made = 0;
    const provider = new BedrockProvider(async () => {
      made++;
      return new BedrockRuntimeClient({ region: 'us-east-1' });
    });
    // Act and assess: nothing made until a call, then one client for every call
    assert.equal(made, 0);
    await provider.complete(request());
    await provider.complete(request());
    assert.equal(made, 1);
    assert.equal(bedrock.commandCalls(ConverseCommand).length, 2);
  });

  it('answers a factory that fails as spent nothing, and tries again at the next call', async () => {
    let attempts = 0;
    const provider = new BedrockProvider(async () => {
      attempts++;
      throw new Error('Cannot find package');
    });
    const error = await failure(provider.complete(request()));
    assert.deepEqual(error.spent, { kind: 'nothing' });
    await failure(provider.complete(request()));
    assert.equal(attempts, 2);
  });
});

describe('Function: readLlmProvider', () => {
  it('defaults to local outside Lambda, and takes only bedrock in Lambda', () => {
    assert.equal(readLlmProvider({}), 'local');
    assert.equal(readLlmProvider({ LLM_PROVIDER: 'bedrock' }), 'bedrock');
    assert.equal(readLlmProvider({ LLM_PROVIDER: 'local' }), 'local');
    assert.equal(readLlmProvider({ AWS_LAMBDA_FUNCTION_NAME: 'f', LLM_PROVIDER: 'bedrock' }), 'bedrock');
    for (const value of [undefined, '', 'local', 'openai']) {
      assert.throws(
        () => readLlmProvider({ AWS_LAMBDA_FUNCTION_NAME: 'f', LLM_PROVIDER: value }),
        (e: unknown) => e instanceof InvalidSettingError && /LLM_PROVIDER/.test(e.message),
      );
    }
    assert.throws(() => readLlmProvider({ LLM_PROVIDER: 'Bedrock' }), InvalidSettingError);
  });

  it('answers any environment with a provider or an InvalidSettingError, never anything else', () => {
    const value = fc.option(fc.oneof(fc.constantFrom('bedrock', 'local', ''), fc.string()), { nil: undefined });
    fc.assert(
      fc.property(value, value, (provider, lambda) => {
        try {
          const kind = readLlmProvider({ LLM_PROVIDER: provider, AWS_LAMBDA_FUNCTION_NAME: lambda });
          assert.ok(kind === 'bedrock' || kind === 'local');
          if (lambda) assert.equal(kind, 'bedrock', 'in Lambda only Bedrock');
        } catch (error) {
          assert.ok(error instanceof InvalidSettingError, String(error));
        }
      }),
    );
  });
});

describe('Function: reservationOf', () => {
  it('is at least the cost of any answer within the prompt bound and max_tokens, for any text and any model', () => {
    const text = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 200 }),
      fc.string({ unit: 'binary', maxLength: 200 }),
      fc.constantFrom('漢字かな交じり文', '😀👩‍👩‍👧‍👦🏳️‍🌈', 'ab'.repeat(50)),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...Object.values(MODELS)),
        text,
        fc.integer({ min: 1, max: 4096 }),
        fc.tuple(fc.nat(), fc.nat(), fc.nat()),
        fc.nat(),
        (model, prompt, maxTokens, [a, b, c], output) => {
          const bound = promptTokenBound(model, prompt);
          assert.ok(bound >= Buffer.byteLength(prompt, 'utf8'), 'never fewer tokens than bytes');
          // any split of the bounded input between plain, cache-read and cache-write tokens
          const total = a + b + c || 1;
          const input = Math.floor((bound * a) / total);
          const read = Math.floor((bound * b) / total);
          const usage = {
            inputTokens: input,
            cacheReadInputTokens: read,
            cacheWriteInputTokens: bound - input - read,
            outputTokens: output % (maxTokens + 1),
          };
          assert.ok(costOf(model, usage) <= reservationOf(model, prompt, maxTokens));
        },
      ),
    );
  });

  it('counts CJK text and emoji by their bytes, not characters ÷ 4', () => {
    const cjk = '漢'.repeat(1000); // 3 bytes each
    assert.equal(promptTokenBound(lite, cjk), 3000 + lite.promptOverheadTokens);
    const emoji = '😀'.repeat(1000); // 4 bytes, 2 UTF-16 units each
    assert.equal(promptTokenBound(lite, emoji), 4000 + lite.promptOverheadTokens);
  });
});
