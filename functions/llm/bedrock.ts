/**
 * The deployed provider: Amazon Bedrock's Converse API. One attempt per call
 * (an SDK retry after a timeout could be billed twice), bounded by the
 * caller's AbortSignal (the invocation's remaining time) and, as a backstop,
 * by the request timeout. Each failure says what it spent (provider.ts): a
 * refusal before any work spent nothing; a server-side or model error, a
 * timeout or an abort after the request was sent may have produced tokens.
 */
import {
  BedrockRuntimeClient,
  type BedrockRuntimeClientConfig,
  ConverseCommand,
  type ConverseCommandOutput,
} from '@aws-sdk/client-bedrock-runtime';
import { AWS_CLIENT_OPTIONS } from '@platform/rate-limit/redis';
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

/** The client the deployed route uses: the platform's options, but one attempt and a request timeout for a long call. */
export function bedrockClient(
  requestTimeoutMs: number,
  overrides: BedrockRuntimeClientConfig = {},
): BedrockRuntimeClient {
  return new BedrockRuntimeClient({
    ...overrides,
    ...AWS_CLIENT_OPTIONS,
    maxAttempts: 1,
    requestHandler: { ...AWS_CLIENT_OPTIONS.requestHandler, requestTimeout: requestTimeoutMs },
  });
}

function usageOf(output: ConverseCommandOutput): Usage {
  const u = output.usage;
  const count = (n: number | undefined) => (Number.isSafeInteger(n) && (n as number) >= 0 ? (n as number) : 0);
  return {
    inputTokens: count(u?.inputTokens),
    outputTokens: count(u?.outputTokens),
    cacheReadInputTokens: count(u?.cacheReadInputTokens),
    cacheWriteInputTokens: count(u?.cacheWriteInputTokens),
  };
}

export class BedrockProvider implements LlmProvider {
  readonly #client: BedrockRuntimeClient;

  constructor(client: BedrockRuntimeClient) {
    this.#client = client;
  }

  async complete(request: CompletionRequest): Promise<Completion> {
    let output: ConverseCommandOutput;
    try {
      output = await this.#client.send(
        new ConverseCommand({
          modelId: request.bedrockModelId,
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
    if (!output.usage) {
      // an answer without its usage: what it cost is unknown, so its estimate stays charged
      throw new ProviderError('Bedrock answered without a usage', { kind: 'unknown' });
    }
    const text = (output.output?.message?.content ?? []).map((block) => block.text ?? '').join('');
    return { text, usage: usageOf(output) };
  }
}
