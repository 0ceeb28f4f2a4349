import type { Route } from '../route.ts';

export const route = {
  id: 'api',
  methods: ['GET', 'POST'],
  path: '/v1/{proxy+}',
  handler: 'api/handler.ts',
  rawBody: false,
  limits: [
    { policy: { byRole: 'rate' }, key: { from: 'apiKey', header: 'x-api-key' } },
    { policy: { byRole: 'quota' }, key: { from: 'apiKey', header: 'x-api-key' } },
  ],
  scope: { from: 'apiKey', header: 'x-api-key' },
  uses: ['apiKeyRegistry'],
  secrets: ['api-key-pepper'],
  inHandler: [['api-unknown-key-ip']],
} as const satisfies Route;
