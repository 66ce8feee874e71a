package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	env, err := EnvFrom(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	h, err := New(context.Background(), env, nil) // once per execution environment
	if err != nil {
		log.Fatal(err)
	}
	if env.Sweeper {
		lambda.Start(h.Sweep)
		return
	}
	lambda.Start(h.Handle)
}
