// The peer side of make bench-peers: one idempotent function call with a
// one-field key, made idempotent by Powertools for AWS Lambda (TypeScript)
// with its defaults, on DynamoDB (STORE=dynamodb: DynamoDBPersistenceLayer)
// or on Redis (STORE=redis: CachePersistenceLayer, the ./cache export, on
// a @redis/client client). It reads commands from standard input, one JSON
// object a line ({"op": "fresh" | "replay", "n": calls, "seq": first
// ticket number, "count": true for the counting pass}), makes the calls
// one after another and answers each command with one line: {"ns": [the
// time of each call], "runs": the function's runs}.
//
// DynamoDB: ENDPOINT is the endpoint the timed calls use, COUNT_ENDPOINT
// the counting proxy the calls of the counting pass use (a second client,
// persistence layer and function), TABLE the table (partition key id).
// Redis: REDIS_URL is the server; the counting pass uses the same client
// (the server counts the commands).
import { createInterface } from 'node:readline';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';

const config = new IdempotencyConfig({ eventKeyJmesPath: 'ticketId' });
// As in a Lambda handler: the time left bounds the in-progress record.
config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 });

let runs = 0;
const handler = async () => {
  runs++;
  return { summary: 'sent', ref: 'msg_1', id: 'msg_1' };
};

// persistence returns the persistence layers of the timed calls and of
// the counting pass.
async function persistence() {
  if (process.env.STORE === 'redis') {
    const { createClient } = await import('@redis/client');
    const { CachePersistenceLayer } = await import('@aws-lambda-powertools/idempotency/cache');
    const client = await createClient({ url: process.env.REDIS_URL }).connect();
    const layer = new CachePersistenceLayer({ client });
    return [layer, layer];
  }
  const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
  const { DynamoDBPersistenceLayer } = await import('@aws-lambda-powertools/idempotency/dynamodb');
  const layer = (endpoint) =>
    new DynamoDBPersistenceLayer({
      tableName: process.env.TABLE,
      awsSdkV3Client: new DynamoDBClient({
        endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      }),
    });
  return [layer(process.env.ENDPOINT), layer(process.env.COUNT_ENDPOINT)];
}

const [timed, counted] = await persistence();
const sendReply = makeIdempotent(handler, { persistenceStore: timed, config });
const sendReplyCounted = makeIdempotent(handler, { persistenceStore: counted, config });

const lines = createInterface({ input: process.stdin });
process.stdout.write(JSON.stringify({ ready: true }) + '\n');
for await (const line of lines) {
  const { op, n, seq, count } = JSON.parse(line);
  const fn = count ? sendReplyCounted : sendReply;
  const ns = [];
  const before = runs;
  for (let i = 0; i < n; i++) {
    const ticket = op === 'fresh' ? `fresh-${seq + i}` : 'replay';
    const t0 = process.hrtime.bigint();
    await fn({ ticketId: ticket, text: 'Your refund is on its way.' });
    ns.push(Number(process.hrtime.bigint() - t0));
  }
  process.stdout.write(JSON.stringify({ ns, runs: runs - before }) + '\n');
}
process.exit(0);
