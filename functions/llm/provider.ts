/**
 * The LLM provider the API proxies to. In AWS, implement this interface
 * against the provider the platform uses (the integration point); locally,
 * `FakeProvider` answers with a usage a test can predict.
 */
export interface Completion {
  readonly text: string;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number };
}

export interface LlmProvider {
  /** Throws when the call failed (nothing was spent: the reservation is refunded). */
  complete(request: { model: string; prompt: string; maxTokens: number }): Promise<Completion>;
}

/** A rough token count for the estimate (4 characters per token); the settle uses the provider's own count. */
export function estimatePromptTokens(prompt: string): number {
  return Math.max(1, Math.ceil(prompt.length / 4));
}

/**
 * The local provider: prompt tokens as estimated, and a completion of half
 * the prompt's tokens (at most max_tokens). Steered by the prompt, for tests
 * and the demo: `[fail]` fails the call, `[slow:<ms>]` answers after that long,
 * `[long]` uses every max_token.
 */
export class FakeProvider implements LlmProvider {
  async complete(request: { model: string; prompt: string; maxTokens: number }): Promise<Completion> {
    const slow = /\[slow:(\d{1,5})\]/.exec(request.prompt);
    if (slow) await new Promise((resolve) => setTimeout(resolve, Number(slow[1])));
    if (request.prompt.includes('[fail]')) throw new Error('the fake provider failed on purpose');
    const promptTokens = estimatePromptTokens(request.prompt);
    const completionTokens = request.prompt.includes('[long]')
      ? request.maxTokens
      : Math.min(request.maxTokens, Math.ceil(promptTokens / 2));
    return { text: `echo: ${request.prompt.slice(0, 80)}`, usage: { promptTokens, completionTokens } };
  }
}
