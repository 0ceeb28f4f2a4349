/**
 * The deployed provider: Amazon Bedrock's Converse API. One attempt per call
 * (an SDK retry after a timeout could be billed twice), bounded by the
 * caller's AbortSignal (the invocation's remaining time) and, as a backstop,
 * by the request timeout. Each failure says what it spent (provider.ts): a
 * refusal before any work spent nothing; a server-side or model error, a
 * timeout or an abort after the request was sent may have produced tokens.
 */
import type {
  BedrockRuntimeClient,
  BedrockRuntimeClientConfig,
  ConverseCommandOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { AWS_CLIENT_OPTIONS } from '@platform/rate-limit/redis';
import { inferenceProfileIdOf } from '../../config/bedrock-profiles.ts';
import type { Usage } from './models.ts';
import { type Completion, type CompletionRequest, type LlmProvider, ProviderError } from './provider.ts';

/** Bedrock's errors that refuse a call before the model runs: nothing was produced, nothing is charged. */
const REFUSED_BEFORE_WORK: ReadonlySet<string> = new Set([
  'ValidationException',
  'AccessDeniedException',
  'ThrottlingException',
  'ResourceNotFoundException',
  'ServiceQuotaExceededException',
  'ModelNotReadyException',
]);

/**
 * The SDK, loaded by the first call that reaches Bedrock rather than at the
 * cold start (~90-130 ms here): a call refused by its limits never needs it,
 * and next to a model's answer the load is small.
 */
let sdk: Promise<typeof import('@aws-sdk/client-bedrock-runtime')> | undefined;
const bedrockSdk = () => {
  sdk ??= import('@aws-sdk/client-bedrock-runtime');
  return sdk;
};

/** The client the deployed route uses: the platform's options, but one attempt and a request timeout for a long call. */
export async function bedrockClient(
  requestTimeoutMs: number,
  overrides: BedrockRuntimeClientConfig = {},
): Promise<BedrockRuntimeClient> {
  const { BedrockRuntimeClient } = await bedrockSdk();
  return new BedrockRuntimeClient({
    ...overrides,
    ...AWS_CLIENT_OPTIONS,
    maxAttempts: 1,
    requestHandler: { ...AWS_CLIENT_OPTIONS.requestHandler, requestTimeout: requestTimeoutMs },
  });
}

/**
 * The answer's usage, or undefined when its input or output tokens are not
 * told (absent or not a count): what it cost is then unknown, not 0. The
 * cache counts are absent for a call that used no cache: 0.
 */
function usageOf(output: ConverseCommandOutput): Usage | undefined {
  const u = output.usage;
  const isCount = (n: number | undefined): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
  if (!isCount(u?.inputTokens) || !isCount(u?.outputTokens)) return undefined;
  const cache = (n: number | undefined) => (isCount(n) ? n : 0);
  return {
    inputTokens: u.inputTokens,
    outputTokens: u.outputTokens,
    cacheReadInputTokens: cache(u.cacheReadInputTokens),
    cacheWriteInputTokens: cache(u.cacheWriteInputTokens),
  };
}

export class BedrockProvider implements LlmProvider {
  readonly #makeClient: () => Promise<BedrockRuntimeClient>;
  #client: Promise<BedrockRuntimeClient> | undefined;

  /** A client, or how to make one at the first call (the SDK then loads at that call, not at the cold start). */
  constructor(client: BedrockRuntimeClient | (() => Promise<BedrockRuntimeClient>)) {
    this.#makeClient = typeof client === 'function' ? client : () => Promise.resolve(client);
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    let client: BedrockRuntimeClient;
    let ConverseCommand: typeof import('@aws-sdk/client-bedrock-runtime')['ConverseCommand'];
    try {
      this.#client ??= this.#makeClient();
      [client, { ConverseCommand }] = await Promise.all([this.#client, bedrockSdk()]);
    } catch (error) {
      this.#client = undefined; // the next call tries again
      throw new ProviderError('the Bedrock SDK could not be loaded', { kind: 'nothing' }, { cause: error });
    }
    let modelId: string;
    try {
      // through the client's region's inference profile (what the role is granted), which Bedrock serves there
      modelId = inferenceProfileIdOf(request.bedrockModelId, await client.config.region());
    } catch (error) {
      throw new ProviderError('no Bedrock inference profile for this region', { kind: 'nothing' }, { cause: error });
    }
    let output: ConverseCommandOutput;
    try {
      output = await client.send(
        new ConverseCommand({
          modelId,
          messages: [{ role: 'user', content: [{ text: request.prompt }] }],
          inferenceConfig: { maxTokens: request.maxTokens },
        }),
        { abortSignal: request.signal },
      );
    } catch (error) {
      const name = (error as { name?: unknown })?.name;
      if (typeof name === 'string' && REFUSED_BEFORE_WORK.has(name)) {
        throw new ProviderError(
          `Bedrock refused the call (${name})`,
          { kind: 'nothing' },
          {
            throttled: name === 'ThrottlingException' || name === 'ServiceQuotaExceededException',
            cause: error,
          },
        );
      }
      throw new ProviderError(
        `Bedrock call failed after it was sent (${typeof name === 'string' ? name : 'unknown'})`,
        { kind: 'unknown' },
        { cause: error },
      );
    }
    const usage = usageOf(output);
    if (!usage) {
      // an answer without its usage (or with part of it): what it cost is unknown, so its estimate stays charged
      throw new ProviderError('Bedrock answered without a usage', { kind: 'unknown' });
    }
    const text = (output.output?.message?.content ?? []).map((block) => block.text ?? '').join('');
    return { text, usage };
  }
}
