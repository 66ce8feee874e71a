// The stack of the oncely Lambda example: the ledger table, the function
// that executes tool calls, a scheduled sweeper that settles uncertain
// actions, a dead-letter queue for async invocations, and least-privilege
// roles. The Stripe key stays in SSM Parameter Store (a SecureString the
// functions read at cold start), never in plain environment variables.
import * as cdk from "aws-cdk-lib";
import { Construct } from "constructs";
import * as dynamodb from "aws-cdk-lib/aws-dynamodb";
import * as events from "aws-cdk-lib/aws-events";
import * as targets from "aws-cdk-lib/aws-events-targets";
import * as iam from "aws-cdk-lib/aws-iam";
import * as lambda from "aws-cdk-lib/aws-lambda";
import * as logs from "aws-cdk-lib/aws-logs";
import * as sqs from "aws-cdk-lib/aws-sqs";
import * as ssm from "aws-cdk-lib/aws-ssm";

export interface OncelyLambdaStackProps extends cdk.StackProps {
  /** Directory holding the function's `bootstrap` binary (arm64). */
  readonly assetDir: string;
  /** Name of the SecureString parameter holding the Stripe secret key. */
  readonly stripeKeyParameter: string;
  /** How often the sweeper runs (default: every 5 minutes). */
  readonly sweepEvery?: cdk.Duration;
}

export class OncelyLambdaStack extends cdk.Stack {
  readonly table: dynamodb.TableV2;
  readonly toolFunction: lambda.Function;
  readonly sweeperFunction: lambda.Function;

  constructor(scope: Construct, id: string, props: OncelyLambdaStackProps) {
    super(scope, id, props);

    // The ledger, as ledgerdynamo.CreateTable makes it: key pk, the
    // state-lease_until index for the sweeper, TTL on expires_at.
    this.table = new dynamodb.TableV2(this, "Ledger", {
      partitionKey: { name: "pk", type: dynamodb.AttributeType.STRING },
      billing: dynamodb.Billing.onDemand(),
      timeToLiveAttribute: "expires_at",
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      removalPolicy: cdk.RemovalPolicy.RETAIN,
      globalSecondaryIndexes: [
        {
          indexName: "state-lease_until",
          partitionKey: { name: "state", type: dynamodb.AttributeType.STRING },
          sortKey: { name: "lease_until", type: dynamodb.AttributeType.NUMBER },
          projectionType: dynamodb.ProjectionType.ALL,
        },
      ],
    });

    const stripeKey = ssm.StringParameter.fromSecureStringParameterAttributes(this, "StripeKey", {
      parameterName: props.stripeKeyParameter,
    });
    const code = lambda.Code.fromAsset(props.assetDir);
    const common = {
      runtime: lambda.Runtime.PROVIDED_AL2023,
      architecture: lambda.Architecture.ARM_64,
      handler: "bootstrap",
      code,
      memorySize: 256,
      environment: {
        ONCELY_TABLE: this.table.tableName,
        STRIPE_API_KEY_PARAMETER: props.stripeKeyParameter,
      },
    };

    // Tool calls. Its timeout is the claims' longest lease: a retry after
    // a timed-out invocation takes the record over and reconciles.
    const dlq = new sqs.Queue(this, "ToolDeadLetters", {
      retentionPeriod: cdk.Duration.days(14),
      enforceSSL: true,
    });
    this.toolFunction = new lambda.Function(this, "Tool", {
      ...common,
      description: "Executes an agent's tool calls through oncely",
      timeout: cdk.Duration.seconds(30),
      deadLetterQueue: dlq,
      retryAttempts: 2,
      logGroup: new logs.LogGroup(this, "ToolLogs", { retention: logs.RetentionDays.ONE_MONTH }),
    });

    // The sweeper settles what calls left uncertain or abandoned. It needs
    // the same providers' credentials as the tool function.
    this.sweeperFunction = new lambda.Function(this, "Sweeper", {
      ...common,
      description: "Reconciles oncely's uncertain and abandoned actions",
      timeout: cdk.Duration.minutes(5),
      environment: { ...common.environment, ONCELY_MODE: "sweeper" },
      logGroup: new logs.LogGroup(this, "SweeperLogs", { retention: logs.RetentionDays.ONE_MONTH }),
    });
    new events.Rule(this, "SweepSchedule", {
      schedule: events.Schedule.rate(props.sweepEvery ?? cdk.Duration.minutes(5)),
      targets: [new targets.LambdaFunction(this.sweeperFunction, { retryAttempts: 0 })],
    });

    // Least privilege: the tool function claims, records and reads single
    // items; the sweeper also queries the index. Nothing scans or deletes.
    this.toolFunction.addToRolePolicy(new iam.PolicyStatement({
      actions: ["dynamodb:UpdateItem", "dynamodb:GetItem"],
      resources: [this.table.tableArn],
    }));
    this.sweeperFunction.addToRolePolicy(new iam.PolicyStatement({
      actions: ["dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:Query"],
      resources: [this.table.tableArn, `${this.table.tableArn}/index/state-lease_until`],
    }));
    for (const fn of [this.toolFunction, this.sweeperFunction]) {
      // GetParameter alone (grantRead would add Describe and History). A
      // SecureString under the AWS-managed aws/ssm key needs no KMS grant.
      fn.addToRolePolicy(new iam.PolicyStatement({
        actions: ["ssm:GetParameter"],
        resources: [stripeKey.parameterArn],
      }));
    }

    new cdk.CfnOutput(this, "ToolFunctionName", { value: this.toolFunction.functionName });
    new cdk.CfnOutput(this, "LedgerTableName", { value: this.table.tableName });
  }
}
