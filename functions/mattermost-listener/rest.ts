/** The two REST requests of the catch-up (`GET /api/v4/users/me/channels`, `GET /api/v4/channels/{id}/posts`). */
import * as v from 'valibot';
import { ChannelList, deleted, Post, PostList } from './posts.ts';
import { serverUrl } from './settings.ts';

/** A request of the catch-up that should be tried again (a network failure, a 5xx, a 408 or 429, a malformed answer). */
export class CatchUpError extends Error {}

/**
 * A request of the catch-up the server refuses for good: a 4xx other than
 * 408 and 429 (the bot removed from the channel: 403; the channel deleted:
 * 404). Asking again in this catch-up would get the same answer.
 */
export class CatchUpRefused extends Error {
  readonly status: number;

  constructor(path: string, status: number) {
    super(`${path}: status ${status}`);
    this.status = status;
  }
}

const refusedForGood = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;

export class MattermostRest {
  readonly #url: string;
  readonly #token: string;

  constructor(url: string, token: string) {
    this.#url = url;
    this.#token = token;
  }

  async #get(path: string, query: Readonly<Record<string, string>> = {}): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(serverUrl(this.#url, path, query), {
        headers: { Authorization: `Bearer ${this.#token}` },
        signal: AbortSignal.timeout(10_000),
      });
    } catch (error) {
      throw new CatchUpError(`${path}: ${String(error)}`);
    }
    if (refusedForGood(response.status)) throw new CatchUpRefused(path, response.status);
    if (!response.ok) throw new CatchUpError(`${path}: status ${response.status}`);
    try {
      return await response.json();
    } catch {
      throw new CatchUpError(`${path}: not JSON`);
    }
  }

  /** The channels the bot is a member of, with when each last got a post. */
  async memberChannels(): Promise<v.InferOutput<typeof ChannelList>> {
    const list = v.safeParse(ChannelList, await this.#get('api/v4/users/me/channels'));
    if (!list.success) throw new CatchUpError('channels: unexpected answer');
    return list.output;
  }

  /** A channel's posts created at or after `since`, oldest first (edits of older posts are not new posts). */
  async postsSince(channel: string, since: number): Promise<Post[]> {
    // `since - 1`: a post in the very millisecond of the mark is asked for whether the server counts from it or after it
    const list = v.safeParse(
      PostList,
      await this.#get(`api/v4/channels/${channel}/posts`, { since: String(Math.max(0, since - 1)) }),
    );
    if (!list.success) throw new CatchUpError(`${channel}: unexpected answer`);
    return Object.values(list.output.posts)
      .flatMap((p) => (v.is(Post, p) && p.create_at >= since && !deleted(p as Post) ? [p as Post] : []))
      .sort((a, b) => a.create_at - b.create_at);
  }
}
