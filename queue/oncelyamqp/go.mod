module github.com/oncely/oncely/queue/oncelyamqp

go 1.26.0

require github.com/oncely/oncely v0.2.0

require github.com/rabbitmq/amqp091-go v1.17.0 // indirect

