package oncelynats

// ServerURLForExamples is, for the examples, the URL of the NATS server the
// tests use (the one on 127.0.0.1:4222, or one TestMain started).
func ServerURLForExamples() string { return natsURL }
