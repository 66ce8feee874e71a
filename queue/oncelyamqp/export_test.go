package oncelyamqp

// ServerURLForExamples is, for the examples, the URL of the RabbitMQ
// broker the tests use (the one on 127.0.0.1:5672, or one TestMain
// started).
func ServerURLForExamples() string { return amqpURL }
