// A scripted session of the official Node client (resend, pinned in
// package.json) against a Resend-compatible server: the base URL is
// RESEND_BASE_URL, the key RESEND_API_KEY. The request that leaves out a
// required field and the route the fake does not model go to
// RESEND_DIRECT_URL instead: the server itself, not a validating proxy,
// which would refuse the first itself and answer the second's 501 with a
// mock. It prints one JSON object with
// what each step got; the Go test that runs it checks the answers.
import { Resend } from 'resend';

const resend = new Resend(process.env.RESEND_API_KEY);
const direct = new Resend(process.env.RESEND_API_KEY, { baseUrl: process.env.RESEND_DIRECT_URL || process.env.RESEND_BASE_URL });
const out = {};
const email = {
  from: 'Acme <orders@acme.test>',
  to: ['ada@example.com'],
  subject: 'Order 42 confirmed',
  html: '<p>Your order is confirmed.</p>',
  tags: [{ name: 'oncely_key', value: 'node-session-1' }],
};
const key = { idempotencyKey: 'node-session-1' };

out.first = await resend.emails.send(email, key);
out.replay = await resend.emails.send(email, key);
out.reused = await resend.emails.send({ ...email, subject: 'Order 43 confirmed' }, key);
out.second = await resend.emails.send({ ...email, to: 'bob@example.com', tags: undefined });
out.get = out.first.data ? await resend.emails.get(out.first.data.id) : null;
out.list = await resend.emails.list({ limit: 1 });
out.missingTo = await direct.emails.send({ from: email.from, subject: 'no recipient', text: 'x' });
out.badTag = await resend.emails.send({ ...email, tags: [{ name: 'bad tag', value: 'x' }] });
out.cancel = out.first.data ? await direct.emails.cancel(out.first.data.id) : null;
console.log(JSON.stringify(out));
