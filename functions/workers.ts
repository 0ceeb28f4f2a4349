/**
 * The consumers that are not HTTP routes (functions/routes.ts has those):
 * what runs them, for the build (scripts/bundle.ts) and the deployment. Plain
 * data, like the route table.
 */

import type { PolicyName } from '../config/catalogue.ts';
import type { SecretName } from '../config/secrets.ts';

/** The policy the harvester paces each source by (functions/harvester/pacer.ts): named here only. */
export const HARVESTER_POLICY: PolicyName = 'harvester-source';

/** The policy the Mattermost listener checks each channel's posts against: named here only. */
export const MATTERMOST_POLICY: PolicyName = 'mattermost-channel';

/** A function invoked on a schedule (EventBridge in AWS). */
export interface ScheduledWorker {
  readonly id: string;
  /** The handler module, relative to functions/; it exports `handler`. */
  readonly handler: string;
  /** How often a run starts; runs may overlap, they share the cursor and the pace. */
  readonly everyMinutes: number;
  /** The policies it checks (and publishes metrics for: the deployed alarms watch them). */
  readonly policies: readonly PolicyName[];
  /** The secrets it reads (config/secrets.ts): it is granted their folder and no other. */
  readonly secrets: readonly SecretName[];
}

/** A long-running process (ECS Fargate in AWS: a WebSocket does not fit Lambda). */
export interface LongRunningService {
  readonly id: string;
  /** The entry module, relative to functions/; it runs until SIGTERM. */
  readonly entry: string;
  /** The policies it checks (and publishes metrics for: the deployed alarms watch them). */
  readonly policies: readonly PolicyName[];
  /** The secrets it reads (config/secrets.ts): it is granted their folder and no other. */
  readonly secrets: readonly SecretName[];
}

export const scheduled: readonly ScheduledWorker[] = [
  {
    id: 'harvester',
    handler: 'harvester/handler.ts',
    everyMinutes: 5,
    policies: [HARVESTER_POLICY],
    secrets: [],
  },
  // a two-region stage's rebalancer (issue 32), deployed per region on REBALANCE_PERIOD_SECONDS (infra/rebalancer.ts)
  {
    id: 'rebalancer',
    handler: 'rebalancer/handler.ts',
    everyMinutes: 1,
    policies: [],
    secrets: [],
  },
];

export const services: readonly LongRunningService[] = [
  {
    id: 'mattermost-listener',
    entry: 'mattermost-listener/main.ts',
    policies: [MATTERMOST_POLICY],
    secrets: ['mattermost-bot-token'],
  },
];

/** A function operators invoke through IAM (no route): the admin CLI against a deployed stage. */
export interface OperatorFunction {
  readonly id: string;
  /** The handler module, relative to functions/; it exports `handler`. */
  readonly handler: string;
  /** The secrets it reads (config/secrets.ts): it is granted their folder and no other. */
  readonly secrets: readonly SecretName[];
}

export const operated: readonly OperatorFunction[] = [
  // the CLI hashes --email as login does, and --api-key as the API does
  { id: 'admin', handler: 'admin/handler.ts', secrets: ['email-pepper', 'api-key-pepper'] },
];
