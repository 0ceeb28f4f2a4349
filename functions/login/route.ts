import type { Route } from '../route.ts';

export const route = {
  id: 'login',
  methods: ['POST'],
  path: '/auth/login',
  handler: 'login/handler.ts',
  rawBody: false,
  limits: [{ policy: 'login-ip', key: { from: 'clientIp' } }],
  uses: ['userDirectory'],
  secrets: ['email-pepper'],
  inHandler: [['login-account']],
} as const satisfies Route;
