package ledgerdynamo_test

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// The tests run against the server of dynalitetest: DYNAMODB_ENDPOINT, or
// a dynalite it starts for this test binary.
func TestMain(m *testing.M) { os.Exit(dynalitetest.Main(m)) }

// newClient returns a client for endpoint whose requests go through rt
// (nil: dynalitetest's HTTP client).
func newClient(endpoint string, rt http.RoundTripper) *dynamodb.Client {
	if rt == nil {
		return dynalitetest.NewClient(endpoint)
	}
	return dynalitetest.NewClient(endpoint, func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: rt} })
}

// transport carries the counter's requests, with enough idle connections
// for concurrent tests.
var transport = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 128
	return t
}()

// counter is an http.RoundTripper that counts DynamoDB requests on the
// wire by operation (the X-Amz-Target header). Copy it freely.
type counter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func newCounter(next http.RoundTripper) *counter {
	if next == nil {
		next = transport
	}
	return &counter{next: next, n: map[string]int{}}
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndexByte(op, '.')+1:]
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// take returns the counts since the last take and starts again from zero.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// total is the number of requests in counts.
func total(counts map[string]int) int {
	sum := 0
	for _, v := range counts {
		sum += v
	}
	return sum
}
