/**
 * A stage's monthly AWS Budgets cost budget (the stage file's `budget`): the
 * costs of the resources tagged with the stage and the service
 * (infra/tags.ts), with notifications to the alarm topic and the stage
 * file's addresses when the month's actual spend passes 80 % of the limit and
 * when the forecast passes 100 %. WAF logs, X-Ray segments and EMF lines
 * scale with traffic: this is what tells someone before the invoice does.
 * The tag filter counts only once `stage` and `service` are activated as cost
 * allocation tags (docs/deploy.md, "Tags and the budget").
 */
import { Stack } from 'aws-cdk-lib';
import { CfnBudget } from 'aws-cdk-lib/aws-budgets';
import { PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { SERVICE_TAG_VALUE, TAG_KEYS } from './tags.ts';

/** When the budget notifies: the month's actual spend past 80 %, the forecast past 100 %. */
export const BUDGET_NOTIFICATIONS = [
  { notificationType: 'ACTUAL', threshold: 80 },
  { notificationType: 'FORECASTED', threshold: 100 },
] as const;

export interface StageBudgetProps {
  readonly name: string;
  readonly stage: string;
  readonly monthlyLimitUsd: number;
  readonly emails: readonly string[];
  /** The alarm topic (encrypted with its own key, which Budgets is let use). */
  readonly topic: ITopic;
}

export class StageBudget extends Construct {
  readonly budget: CfnBudget;

  constructor(scope: Construct, id: string, props: StageBudgetProps) {
    super(scope, id);
    const budgets = new ServicePrincipal('budgets.amazonaws.com');
    // Budgets publishes for this account's budgets only (the confused-deputy guard AWS documents)
    props.topic.addToResourcePolicy(
      new PolicyStatement({
        actions: ['sns:Publish'],
        principals: [budgets],
        resources: [props.topic.topicArn],
        conditions: { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } },
      }),
    );
    props.topic.masterKey?.grant(budgets, 'kms:Decrypt', 'kms:GenerateDataKey*');
    const tag = (key: string, value: string) => ({ tags: { key, values: [value], matchOptions: ['EQUALS'] } });
    const subscribers = [
      { subscriptionType: 'SNS', address: props.topic.topicArn },
      ...props.emails.map((address) => ({ subscriptionType: 'EMAIL', address })),
    ];
    this.budget = new CfnBudget(this, 'Budget', {
      budget: {
        budgetName: `${props.name}-monthly`,
        budgetType: 'COST',
        timeUnit: 'MONTHLY',
        budgetLimit: { amount: props.monthlyLimitUsd, unit: 'USD' },
        // the stage's own resources: both tags, so another project's `stage=prod` is not counted
        filterExpression: {
          and: [tag(TAG_KEYS.stage, props.stage), tag(TAG_KEYS.service, SERVICE_TAG_VALUE)],
        },
      },
      notificationsWithSubscribers: BUDGET_NOTIFICATIONS.map(({ notificationType, threshold }) => ({
        notification: { notificationType, comparisonOperator: 'GREATER_THAN', threshold, thresholdType: 'PERCENTAGE' },
        subscribers,
      })),
    });
  }
}
