#!/usr/bin/env node
// The CDK app of the oncely Lambda example. `npm run synth` writes the
// CloudFormation template to cdk.out; `npx cdk deploy` deploys it.
import * as cdk from "aws-cdk-lib";
import { OncelyLambdaStack } from "../lib/stack";

const app = new cdk.App();
new OncelyLambdaStack(app, "OncelyLambda", {
  // The function code: a directory holding the `bootstrap` binary that
  // `make lambda-build` writes (GOOS=linux GOARCH=arm64, -tags lambda.norpc).
  assetDir: app.node.tryGetContext("assetDir") ?? process.env.ONCELY_LAMBDA_ASSET ?? "../../../.tmp/lambda",
  stripeKeyParameter: app.node.tryGetContext("stripeKeyParameter") ?? "/oncely/stripe-api-key",
});
