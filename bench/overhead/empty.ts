/**
 * bench:load's overhead split, the gateway alone: the API route's path served
 * by a bare Lambda handler (no Middy, no limiter, no consumer logic).
 */
export const handler = async () => ({
  statusCode: 200,
  headers: { 'Content-Type': 'application/json' },
  body: '{"ok":true}',
});
