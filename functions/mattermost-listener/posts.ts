/** What the listener reads from Mattermost, validated: posts, `posted` frames, post and channel lists. */
import * as v from 'valibot';

export const Post = v.object({
  id: v.pipe(v.string(), v.regex(/^[a-z0-9]{1,64}$/)),
  channel_id: v.pipe(v.string(), v.regex(/^[a-z0-9]{1,64}$/)),
  create_at: v.pipe(v.number(), v.integer(), v.minValue(0)),
});
export type Post = v.InferOutput<typeof Post> & Record<string, unknown>;

/** A WebSocket `posted` event: the post itself is JSON inside it. */
export const Posted = v.object({
  event: v.literal('posted'),
  data: v.object({ post: v.string() }),
  broadcast: v.object({ channel_id: v.string() }),
});

export const PostList = v.object({ posts: v.record(v.string(), v.unknown()) });

/** A channel of the bot's (`GET /api/v4/users/me/channels`): only what the catch-up needs. */
export const ChannelList = v.array(
  v.looseObject({
    id: v.pipe(v.string(), v.regex(/^[a-z0-9]{1,64}$/)),
    last_post_at: v.optional(v.pipe(v.number(), v.integer()), 0),
  }),
);

/** A post deleted before the listener got to it: nothing to decide. */
export const deleted = (post: Post) => typeof post.delete_at === 'number' && post.delete_at > 0;
