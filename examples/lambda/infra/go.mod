// The CDK app of examples/lambda is TypeScript, not Go. This file makes
// the directory a module of its own, so that the go command's ./... of
// oncely stops here and never walks node_modules (aws-cdk ships
// template .go files that are not Go).
module github.com/oncely/oncely/examples/lambda/infra

go 1.24
