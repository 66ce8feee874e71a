// Command lambda is an AWS Lambda function that executes the tool calls of
// an AI agent through oncely, with its ledger on DynamoDB: however often
// an invocation is repeated (an async retry, a client retry after a
// timeout, the model calling the tool again), each action happens once.
//
// An invocation carries the tool_use blocks of one assistant turn and
// returns one tool_result block per call, ready to send back to Claude:
//
//	{"run_id": "run-1", "tool_calls": [{"type": "tool_use", "id": "toolu_01",
//	  "name": "refund_payment", "input": {"payment_intent": "pi_123", "amount": 1000}}]}
//
//	{"tool_results": [{"type": "tool_result", "tool_use_id": "toolu_01", "is_error": false,
//	  "content": [{"type": "text", "text": "Done: refund re_1 of EUR 10.00 for pi_123 (succeeded)"}]}]}
//
// The Executor is built once per execution environment (cold start) from
// the environment variables that EnvFrom reads. Each claim's lease ends
// with the invocation's deadline at the latest (the context's deadline), so
// when an invocation times out in the middle of a refund, a retry after the
// deadline takes the record over and asks Stripe whether the refund exists
// before acting again. See README.md for deployment.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/reconcile"
)

// Event is one invocation: the tool calls of one assistant turn of a run.
type Event struct {
	// RunID scopes the action keys: the same action in the same run
	// happens once. Required.
	RunID     string    `json:"run_id"`
	ToolCalls []ToolUse `json:"tool_calls"`
}

// ToolUse is a Claude tool_use content block, as the Anthropic Go SDK
// defines it.
type ToolUse = anthropic.ToolUseBlock

// Response holds one tool_result block per tool call, in the order of the
// calls.
type Response struct {
	ToolResults []ToolResult `json:"tool_results"`
}

// ToolResult is a Claude tool_result content block, as the Anthropic Go
// SDK defines it: append the results to the conversation with
// anthropic.NewUserMessage.
type ToolResult = anthropic.ToolResultBlockParam

// Env is the configuration the function reads from its environment.
type Env struct {
	// Table is the ledger table (ONCELY_TABLE). Required.
	Table string
	// DynamoDBEndpoint overrides the DynamoDB endpoint (DYNAMODB_ENDPOINT),
	// for a local DynamoDB-compatible server. Empty: the region's endpoint.
	DynamoDBEndpoint string
	// StripeBaseURL is the Stripe API (STRIPE_BASE_URL, default
	// DefaultStripeBaseURL).
	StripeBaseURL string
	// StripeAPIKey is the secret key (STRIPE_API_KEY), for local runs.
	StripeAPIKey string
	// StripeAPIKeyParameter names an SSM Parameter Store SecureString that
	// holds the secret key (STRIPE_API_KEY_PARAMETER), read once at cold
	// start: the deployed stack's way, so that no secret sits in the
	// function's configuration. One of the two is required.
	StripeAPIKeyParameter string
	// Sweeper selects the scheduled sweeper's handler instead of the tool
	// calls' (ONCELY_MODE=sweeper).
	Sweeper bool
}

// MaxLambdaTimeout is the longest timeout a Lambda function can have.
const MaxLambdaTimeout = 15 * time.Minute

// DefaultStripeBaseURL is Stripe's API.
const DefaultStripeBaseURL = "https://api.stripe.com"

// ErrConfig is matched by the errors of EnvFrom.
var ErrConfig = errors.New("lambda: configuration")

// EnvFrom reads the configuration with getenv (os.Getenv in main).
func EnvFrom(getenv func(string) string) (Env, error) {
	env := Env{
		Table:            getenv("ONCELY_TABLE"),
		DynamoDBEndpoint: getenv("DYNAMODB_ENDPOINT"),
		StripeBaseURL:    getenv("STRIPE_BASE_URL"),
		StripeAPIKey:     getenv("STRIPE_API_KEY"),

		StripeAPIKeyParameter: getenv("STRIPE_API_KEY_PARAMETER"),
		Sweeper:               getenv("ONCELY_MODE") == "sweeper",
	}
	if env.StripeBaseURL == "" {
		env.StripeBaseURL = DefaultStripeBaseURL
	}
	var missing []string
	if env.Table == "" {
		missing = append(missing, "ONCELY_TABLE")
	}
	if env.StripeAPIKey == "" && env.StripeAPIKeyParameter == "" {
		missing = append(missing, "STRIPE_API_KEY_PARAMETER (or STRIPE_API_KEY)")
	}
	if len(missing) > 0 {
		return Env{}, fmt.Errorf("%w: %v not set", ErrConfig, missing)
	}
	if mode := getenv("ONCELY_MODE"); mode != "" && mode != "sweeper" {
		return Env{}, fmt.Errorf("%w: ONCELY_MODE=%q, want sweeper or unset", ErrConfig, mode)
	}
	return env, nil
}

// Options adjust New. The zero value (or nil) gives the defaults.
type Options struct {
	// AWS adds options to the default AWS configuration, which takes the
	// function's role and region from the Lambda environment.
	AWS []func(*config.LoadOptions) error
	// Logger receives a record per call (default: JSON on stderr, which
	// Lambda sends to CloudWatch Logs).
	Logger *slog.Logger
	// Client tunes the Executor; Logger is set from Logger. A zero
	// Liveness becomes MaxLambdaTimeout, so that a claim's lease is always
	// the invocation's deadline: an invocation that times out has stopped,
	// and its claim lapses then.
	Client client.Config
}

// Handler executes tool calls. Build it once with New and pass its Handle
// method to lambda.Start.
type Handler struct {
	exec  *client.Executor
	store ledger.Store
	tools []client.Tool
	log   *slog.Logger
}

// New builds the Handler: the DynamoDB client and ledger, the Stripe
// adapter, and an Executor with the tools registered.
func New(ctx context.Context, env Env, opts *Options) (*Handler, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, o.AWS...)
	if err != nil {
		return nil, fmt.Errorf("lambda: AWS configuration: %w", err)
	}
	db := dynamodb.NewFromConfig(awsCfg, func(d *dynamodb.Options) {
		if env.DynamoDBEndpoint != "" {
			d.BaseEndpoint = aws.String(env.DynamoDBEndpoint)
		}
	})
	key := env.StripeAPIKey
	if env.StripeAPIKeyParameter != "" {
		out, err := ssm.NewFromConfig(awsCfg).GetParameter(ctx, &ssm.GetParameterInput{
			Name: aws.String(env.StripeAPIKeyParameter), WithDecryption: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("lambda: Stripe key from parameter %s: %w", env.StripeAPIKeyParameter, err)
		}
		key = aws.ToString(out.Parameter.Value)
	}
	st := stripe.New(env.StripeBaseURL, &stripe.Config{APIKey: key})

	cc := o.Client
	cc.Logger = o.Logger
	if cc.Liveness == 0 {
		// The executor bounds a lease by the context's deadline; with the
		// longest possible liveness, every claim lasts exactly until the
		// invocation's deadline, with no heartbeats while the tool runs.
		cc.Liveness = MaxLambdaTimeout
	}
	store := ledgerdynamo.New(db, env.Table, nil)
	tools := []client.Tool{RefundTool(st)}
	exec := client.New(store, &cc)
	if err := exec.Register(tools...); err != nil {
		return nil, err
	}
	return &Handler{exec: exec, store: store, tools: tools, log: o.Logger}, nil
}

// Sweep is the scheduled sweeper's handler (an EventBridge schedule
// invokes it; its event is ignored): one reconcile.Sweeper pass over the
// ledger, for the same tools and providers as Handle. It settles what
// calls left uncertain or abandoned, so that no action stays uncertain
// when the model does not call again.
func (h *Handler) Sweep(ctx context.Context) (reconcile.Report, error) {
	rep, err := reconcile.NewSweeper(h.store, h.tools, nil).Sweep(ctx)
	h.log.InfoContext(ctx, "oncely sweep", slog.Any("report", rep), slog.Any("err", err))
	return rep, err
}

// Handle executes the event's tool calls, concurrently, and returns their
// results in order. Every call gets a result that can be shown to the
// model as it is, also when the ledger could not be reached (the call then
// did nothing and says so). The error is reserved for an event that is not
// a run's tool calls.
func (h *Handler) Handle(ctx context.Context, ev Event) (Response, error) {
	if ev.RunID == "" {
		return Response{}, errors.New("lambda: the event has no run_id")
	}
	log := h.log.With(slog.String("run", ev.RunID))
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With(slog.String("request_id", lc.AwsRequestID))
	}
	results := make([]ToolResult, len(ev.ToolCalls))
	var wg sync.WaitGroup
	for i, tu := range ev.ToolCalls {
		wg.Go(func() {
			res, err := h.exec.Execute(ctx, ev.RunID, client.Call{Tool: tu.Name, Input: tu.Input, ID: tu.ID})
			if err != nil {
				log.ErrorContext(ctx, "oncely could not guard the call",
					slog.String("tool", tu.Name), slog.String("tool_use_id", tu.ID), slog.Any("err", err))
			}
			results[i] = *anthropic.NewToolResultBlock(tu.ID, res.Text, res.IsError).OfToolResult
		})
	}
	wg.Wait()
	return Response{ToolResults: results}, nil
}

// RefundTool is refund_payment: refund an amount of a Stripe PaymentIntent.
// Its input is {"payment_intent": "pi_...", "amount": <cents>, "reason":
// "requested_by_customer", "note": "..."}; the payment intent and the
// amount identify the action, the reason (optional) is one of Stripe's
// reasons, and the note is free text the model may reword, never sent. The downstream key goes to Stripe as
// the Idempotency-Key, and after an ambiguous outcome the refund is looked
// up before anything is sent again.
func RefundTool(st *stripe.Client) client.Tool {
	return client.Tool{
		Name: "refund_payment",
		Identity: []client.Field{
			{Path: "payment_intent", Norm: client.Trimmed},
			{Path: "amount", Norm: client.Integer},
		},
		// Stripe's reason is an enum, not free text: a repeat with another
		// reason is a conflict, and a value Stripe would refuse is refused
		// here, before anything is sent, so the model can correct it.
		Validated: []client.Field{{Path: "reason", Norm: RefundReason}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			// Bind reads the values the key was made of: "pi_1 " arrives as
			// "pi_1", and 1000, "1000" or 1000.0 as 1000.
			var in struct {
				PaymentIntent string `json:"payment_intent"`
				Amount        int64  `json:"amount"`
				Reason        string `json:"reason"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err // permanent: nothing was done
			}
			if in.Amount <= 0 {
				return client.Effect{}, client.Permanent(fmt.Errorf("amount: %d is not a positive number of cents", in.Amount))
			}
			re, err := st.Refunds.Create(ctx, inv.DownstreamKey, stripe.RefundParams{PaymentIntent: in.PaymentIntent, Amount: in.Amount, Reason: in.Reason})
			if err != nil {
				return client.Effect{}, err // a *providers.ProviderError knows its class
			}
			return client.Effect{Summary: re.Summary(), Ref: re.ID}, nil
		},
		Reconciler: reconcile.New(st.Refunds, nil),
	}
}

// refundReasons are the reasons Stripe accepts for a refund.
var refundReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

// RefundReason normalizes a refund reason to one of Stripe's values
// ("Requested by customer" becomes requested_by_customer) and refuses
// anything else.
var RefundReason client.Normalizer = client.NormalizerFunc(func(v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("must be a string")
	}
	r := strings.ToLower(strings.Join(strings.FieldsFunc(s, func(c rune) bool { return c == ' ' || c == '_' || c == '-' }), "_"))
	if !slices.Contains(refundReasons, r) {
		return nil, fmt.Errorf("must be one of %s", strings.Join(refundReasons, ", "))
	}
	return r, nil
})
