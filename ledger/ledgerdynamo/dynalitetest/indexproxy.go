package dynalitetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// IndexProxy returns the endpoint of a proxy in front of endpoint that
// adds global secondary indexes to existing tables, which dynalite does
// not (it takes UpdateTable with GlobalSecondaryIndexUpdates Create, and
// changes nothing). The proxy passes every other request through, and
// answers an UpdateTable that creates indexes itself: it copies the
// table's items, deletes the table, creates it again with its indexes
// and the new ones, and puts the items back, so that the new index holds
// what DynamoDB would fill it with. The copy is not atomic: nothing else
// may use the table meanwhile. The proxy stops when tb ends.
func IndexProxy(tb testing.TB, endpoint string) string {
	tb.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		tb.Fatalf("dynalitetest: endpoint %q: %v", endpoint, err)
	}
	upstream := httputil.NewSingleHostReverseProxy(target)
	client := NewClient(endpoint)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateTable") {
			upstream.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req updateTable
		if err := json.Unmarshal(body, &req); err != nil || !slices.ContainsFunc(req.GlobalSecondaryIndexUpdates, func(u indexUpdate) bool { return u.Create != nil }) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			upstream.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if err := addIndexes(r.Context(), client, req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":%q}`, "dynalitetest: "+err.Error())
			return
		}
		fmt.Fprintf(w, `{"TableDescription":{"TableName":%q,"TableStatus":"ACTIVE"}}`, req.TableName)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// updateTable is the part of an UpdateTable request that creates indexes.
type updateTable struct {
	TableName                   string
	AttributeDefinitions        []types.AttributeDefinition
	GlobalSecondaryIndexUpdates []indexUpdate
}

// indexUpdate is one of UpdateTable's GlobalSecondaryIndexUpdates.
type indexUpdate struct {
	Create *struct {
		IndexName  string
		KeySchema  []types.KeySchemaElement
		Projection struct {
			ProjectionType   types.ProjectionType
			NonKeyAttributes []string
		}
		ProvisionedThroughput *types.ProvisionedThroughput
	}
}

// addIndexes creates the indexes of the UpdateTable request by copying
// the table; an index the table has already is left as it is.
func addIndexes(ctx context.Context, client *dynamodb.Client, req updateTable) error {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(req.TableName)})
	if err != nil {
		return err
	}
	d := out.Table
	in := &dynamodb.CreateTableInput{
		TableName:            d.TableName,
		KeySchema:            d.KeySchema,
		AttributeDefinitions: d.AttributeDefinitions,
		BillingMode:          types.BillingModePayPerRequest,
	}
	provisioned := d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != types.BillingModePayPerRequest
	if provisioned {
		in.BillingMode = types.BillingModeProvisioned
		in.ProvisionedThroughput = &types.ProvisionedThroughput{
			ReadCapacityUnits: d.ProvisionedThroughput.ReadCapacityUnits, WriteCapacityUnits: d.ProvisionedThroughput.WriteCapacityUnits,
		}
	}
	for _, g := range d.GlobalSecondaryIndexes {
		gi := types.GlobalSecondaryIndex{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection}
		if provisioned && g.ProvisionedThroughput != nil {
			gi.ProvisionedThroughput = &types.ProvisionedThroughput{
				ReadCapacityUnits: g.ProvisionedThroughput.ReadCapacityUnits, WriteCapacityUnits: g.ProvisionedThroughput.WriteCapacityUnits,
			}
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gi)
	}
	added := false
	for _, u := range req.GlobalSecondaryIndexUpdates {
		c := u.Create
		if c == nil || slices.ContainsFunc(in.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndex) bool {
			return aws.ToString(g.IndexName) == c.IndexName
		}) {
			continue
		}
		added = true
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(c.IndexName), KeySchema: c.KeySchema, ProvisionedThroughput: c.ProvisionedThroughput,
			Projection: &types.Projection{ProjectionType: c.Projection.ProjectionType, NonKeyAttributes: c.Projection.NonKeyAttributes},
		})
	}
	if !added {
		return nil
	}
	for _, def := range req.AttributeDefinitions {
		if !slices.ContainsFunc(in.AttributeDefinitions, func(d types.AttributeDefinition) bool {
			return aws.ToString(d.AttributeName) == aws.ToString(def.AttributeName)
		}) {
			in.AttributeDefinitions = append(in.AttributeDefinitions, def)
		}
	}
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: d.TableName, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		items = append(items, page.Items...)
	}
	if err := deleteTable(client, req.TableName); err != nil {
		return err
	}
	if _, err := client.CreateTable(ctx, in); err != nil {
		return err
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: d.TableName}, time.Minute); err != nil {
		return err
	}
	for _, it := range items {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: d.TableName, Item: it}); err != nil {
			return err
		}
	}
	return nil
}
