/**
 * The LLM provider the route proxies to: Amazon Bedrock when deployed
 * (bedrock.ts), `FakeProvider` for `npm start` and the tests, both behind
 * `LlmProvider`.
 */
import { NO_USAGE, type Usage } from './models.ts';

export interface CompletionRequest {
  /** The model's name in config/llm-models.json, and its Bedrock id. */
  readonly model: string;
  readonly bedrockModelId: string;
  readonly prompt: string;
  readonly maxTokens: number;
  /**
   * Aborted when the invocation's time is nearly up: the provider must then
   * stop the call (close its request) and reject promptly, so the in-flight
   * slot is given back only once the call really ended.
   */
  readonly signal: AbortSignal;
}

export interface Completion {
  readonly text: string;
  readonly usage: Usage;
}

/**
 * What a failed call spent, for its settle: nothing (refused before any work:
 * settled at 0), a known usage (settled at its cost), or unknown (the request
 * was sent and may have produced tokens: its whole estimate stays charged).
 */
export type Spent =
  | { readonly kind: 'nothing' }
  | { readonly kind: 'usage'; readonly usage: Usage }
  | { readonly kind: 'unknown' };

export class ProviderError extends Error {
  override readonly name = 'ProviderError';
  readonly spent: Spent;
  /** The provider refused for load (throttling): the caller may retry later. */
  readonly throttled: boolean;

  constructor(message: string, spent: Spent, options: { throttled?: boolean; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.spent = spent;
    this.throttled = options.throttled ?? false;
  }
}

export interface LlmProvider {
  /** Rejects with a ProviderError saying what was spent; any other rejection counts as `unknown`. */
  complete(request: CompletionRequest): Promise<Completion>;
}

/** Rejects once `signal` aborts (with a ProviderError: the request was sent, what it produced is unknown). */
function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(new ProviderError('the call was aborted at the deadline', { kind: 'unknown' }));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

/**
 * The local provider: input tokens as the estimate bounds them (UTF-8 bytes,
 * no template overhead), and a completion of half of them (at most
 * max_tokens). Steered by the prompt, for tests and the demo:
 * `[fail]` fails before any work (nothing spent), `[fail-after:<n>]` fails
 * after producing n output tokens, `[slow:<ms>]` answers after that long
 * (or when aborted), `[long]` uses every max_token, `[cached:<n>]` reads n
 * input tokens from the cache and writes as many.
 */
export class FakeProvider implements LlmProvider {
  async complete(request: CompletionRequest): Promise<Completion> {
    const inputTokens = Buffer.byteLength(request.prompt, 'utf8');
    if (request.prompt.includes('[fail]')) {
      throw new ProviderError('the fake provider refused on purpose', { kind: 'nothing' });
    }
    const slow = /\[slow:(\d{1,6})\]/.exec(request.prompt);
    if (slow) {
      let timer: NodeJS.Timeout | undefined;
      const done = new Promise((resolve) => {
        timer = setTimeout(resolve, Number(slow[1]));
      });
      try {
        await Promise.race([done, aborted(request.signal)]);
      } finally {
        clearTimeout(timer);
      }
    }
    const failAfter = /\[fail-after:(\d{1,6})\]/.exec(request.prompt);
    if (failAfter) {
      const usage = { ...NO_USAGE, inputTokens, outputTokens: Math.min(request.maxTokens, Number(failAfter[1])) };
      throw new ProviderError('the fake provider failed after producing tokens', { kind: 'usage', usage });
    }
    const cached = Number(/\[cached:(\d{1,6})\]/.exec(request.prompt)?.[1] ?? 0);
    const outputTokens = request.prompt.includes('[long]')
      ? request.maxTokens
      : Math.min(request.maxTokens, Math.ceil(inputTokens / 2));
    return {
      text: `echo: ${request.prompt.slice(0, 80)}`,
      usage: { inputTokens, outputTokens, cacheReadInputTokens: cached, cacheWriteInputTokens: cached },
    };
  }
}
