module github.com/oncely/oncely/examples/nats

go 1.26.0

require (
	github.com/nats-io/nats.go v1.56.0
	github.com/oncely/oncely v0.2.0
	github.com/oncely/oncely/queue/oncelynats v0.2.0
)

require (
	github.com/aws/aws-lambda-go v1.55.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/go-json-experiment/json v1.27.2 // indirect
	github.com/gowebpki/jcs v1.0.2 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/hashicorp/go-retryablehttp v0.7.8 // indirect
	github.com/jmespath-community/go-jmespath v1.1.1 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/resend/resend-go/v3 v3.1.1 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/exp v0.0.0-20230314191032-db074128a8ec // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)
