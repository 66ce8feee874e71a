// The peer side of make bench-peers: one idempotent function call with a
// one-field key, made idempotent by Powertools for AWS Lambda (TypeScript)
// on DynamoDB, with its defaults. It reads commands from standard input,
// one JSON object a line ({"op": "fresh" | "replay", "n": calls, "seq":
// first ticket number}), makes the calls one after another and answers
// each command with one line: {"ns": [the time of each call]}.
// ENDPOINT is the DynamoDB endpoint, TABLE the table (partition key id).
import { createInterface } from 'node:readline';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';

const client = new DynamoDBClient({
  endpoint: process.env.ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});

const config = new IdempotencyConfig({ eventKeyJmesPath: 'ticketId' });
// As in a Lambda handler: the time left bounds the in-progress record.
config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 });

let runs = 0;
const sendReply = makeIdempotent(
  async (input) => {
    runs++;
    return { summary: 'sent', ref: 'msg_1', id: 'msg_1' };
  },
  {
    persistenceStore: new DynamoDBPersistenceLayer({ tableName: process.env.TABLE, awsSdkV3Client: client }),
    config,
  },
);

const call = (ticket) => sendReply({ ticketId: ticket, text: 'Your refund is on its way.' });

const lines = createInterface({ input: process.stdin });
process.stdout.write(JSON.stringify({ ready: true }) + '\n');
for await (const line of lines) {
  const { op, n, seq } = JSON.parse(line);
  const ns = [];
  const before = runs;
  for (let i = 0; i < n; i++) {
    const ticket = op === 'fresh' ? `fresh-${seq + i}` : 'replay';
    const t0 = process.hrtime.bigint();
    await call(ticket);
    ns.push(Number(process.hrtime.bigint() - t0));
  }
  process.stdout.write(JSON.stringify({ ns, runs: runs - before }) + '\n');
}
