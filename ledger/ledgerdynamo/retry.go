package ledgerdynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/cenkalti/backoff/v4"
	"github.com/oncely/oncely/ledger"
)

// class is what a request error means for the caller.
type class int

const (
	// classFatal: do not retry (validation, access denied, missing table,
	// a cancelled context).
	classFatal class = iota
	// classCondition: the condition expression was false; nothing was written.
	classCondition
	// classRejected: the service refused the request before applying it
	// (throttling); retry.
	classRejected
	// classUnknown: the request may or may not have been applied (5xx, a
	// broken connection, an unreadable response); retry.
	classUnknown
)

// classify is the one place that maps SDK errors to what they mean here.
func classify(err error) class {
	var (
		condition *types.ConditionalCheckFailedException
		api       smithy.APIError
		status    interface{ HTTPStatusCode() int }
		send      *smithyhttp.RequestSendError
		deser     *smithy.DeserializationError
	)
	switch {
	case errors.As(err, &condition):
		return classCondition
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return classFatal
	case errors.As(err, &api) && throttled(api.ErrorCode()):
		return classRejected
	case errors.As(err, &status) && status.HTTPStatusCode() >= 500:
		return classUnknown
	case errors.As(err, &send), errors.As(err, &deser):
		return classUnknown
	}
	return classFatal
}

// throttled reports whether an error code means the request was refused
// for capacity or contention and may be retried as is.
func throttled(code string) bool {
	switch code {
	case "ProvisionedThroughputExceededException", "ThrottlingException",
		"RequestLimitExceeded", "TransactionConflictException",
		"ReplicatedWriteConflictException":
		return true
	}
	return false
}

// noSDKRetry turns the SDK's own retryer off for one request, so that the
// Store's loop is the only retry layer and knows about every attempt.
func noSDKRetry(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }

// unavailable wraps a backend error so that it matches ledger.ErrUnavailable
// and still unwraps to the SDK error.
func unavailable(op string, err error) error {
	return fmt.Errorf("ledgerdynamo: %s: %w: %w", op, ledger.ErrUnavailable, err)
}

// conditionFailed is returned by do when the condition expression was false.
type conditionFailed struct {
	// item is the item the condition was evaluated against, when the server
	// returned it (ReturnValuesOnConditionCheckFailure=ALL_OLD); nil otherwise.
	item item
	// maybeApplied is set when an earlier attempt of the same request ended
	// with an unknown outcome: the item may hold this request's own write.
	maybeApplied bool
}

func (c *conditionFailed) Error() string { return "ledgerdynamo: condition failed" }

// retryCost is what a retry not caused by throttling (a 5xx, a broken
// connection) takes from the retry quota: the SDK standard retryer's cost
// (unexported there). A throttled retry takes
// retry.DefaultThrottlingRetryCost (5).
const retryCost uint = 14

// do runs fn, retrying throttling and unknown outcomes with backoff up to
// MaxAttempts, each retry paid from the Store's retry quota
// (Config.RetryQuota). A false condition comes back as *conditionFailed;
// any other failure wraps ledger.ErrUnavailable.
func (s *Store) do(ctx context.Context, op string, fn func(context.Context) error) error {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(s.cfg.InitialBackoff),
		backoff.WithMaxInterval(s.cfg.MaxBackoff),
		backoff.WithMaxElapsedTime(0),
	)
	maybeApplied := false
	// release refunds the token of the retry in progress (nil on the
	// first attempt) when the service answers it.
	var release func() error
	answered := func() {
		if release != nil {
			_ = release() // a successful retry refunds its cost
		} else {
			_ = s.cfg.RetryQuota.AddTokens(retry.DefaultNoRetryIncrement)
		}
	}
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			answered()
			return nil
		}
		c := classify(err)
		switch c {
		case classCondition:
			// The service answered: for the quota, a false condition is a
			// success (the standard retryer counts it as an error only
			// because the SDK returns it as one).
			answered()
			cf := &conditionFailed{maybeApplied: maybeApplied}
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) && len(ccf.Item) > 0 {
				cf.item = ccf.Item
			}
			return cf
		case classFatal:
			return unavailable(op, err)
		case classUnknown:
			maybeApplied = true
		}
		if attempt >= s.cfg.MaxAttempts {
			return unavailable(op, fmt.Errorf("gave up after %d attempts: %w", attempt, err))
		}
		cost := retryCost
		if c == classRejected {
			cost = retry.DefaultThrottlingRetryCost
		}
		rel, qerr := s.cfg.RetryQuota.GetToken(ctx, cost)
		if qerr != nil && ctx.Err() != nil {
			return unavailable(op, fmt.Errorf("%w (last error: %w)", ctx.Err(), err))
		}
		if qerr != nil {
			return unavailable(op, fmt.Errorf("%w after %d attempts (%w): %w", ErrRetryQuota, attempt, qerr, err))
		}
		release = rel
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return unavailable(op, fmt.Errorf("%w (last error: %w)", ctx.Err(), err))
		case <-t.C:
		}
	}
}

// ErrRetryQuota is matched (besides ledger.ErrUnavailable) by the error of
// a request that was not retried because the Store's retry quota
// (Config.RetryQuota) was spent: the service has been throttling or
// failing many of the Store's requests, and retrying them all would only
// add load.
var ErrRetryQuota = errors.New("ledgerdynamo: retry quota exceeded")
