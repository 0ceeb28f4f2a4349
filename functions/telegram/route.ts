import type { Route } from '../route.ts';

export const route = {
  id: 'telegram',
  methods: ['POST'],
  path: '/webhooks/telegram/{bot}',
  handler: 'telegram/handler.ts',
  rawBody: true,
  limits: [{ policy: 'telegram-ip', key: { from: 'clientIp' } }],
  uses: ['eventQueue'],
  secrets: ['telegram-bot-*'],
  inHandler: [['telegram-bot', 'telegram-chat']],
} as const satisfies Route;
