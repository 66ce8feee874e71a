#!/usr/bin/env node
// The CDK app of the idemkit Lambda example. `npm run synth` writes the
// CloudFormation template to cdk.out; `npx cdk deploy` deploys it.
import * as cdk from "aws-cdk-lib";
import { IdemkitLambdaStack } from "../lib/stack";

const app = new cdk.App();
new IdemkitLambdaStack(app, "IdemkitLambda", {
  // The function code: a directory holding the `bootstrap` binary that
  // `make lambda-build` writes (GOOS=linux GOARCH=arm64, -tags lambda.norpc).
  assetDir: app.node.tryGetContext("assetDir") ?? process.env.IDEMKIT_LAMBDA_ASSET ?? "../../../.tmp/lambda",
  stripeKeyParameter: app.node.tryGetContext("stripeKeyParameter") ?? "/idemkit/stripe-api-key",
});
