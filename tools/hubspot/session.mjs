// A scripted session of HubSpot's official Node client against the fake
// (HUBSPOT_BASE_URL, HUBSPOT_TOKEN). It prints one JSON line per step;
// the Go test reads them and the fake's journal.
import hubspot from '@hubspot/api-client';

const { Client } = hubspot;
const client = new Client({ accessToken: process.env.HUBSPOT_TOKEN, basePath: process.env.HUBSPOT_BASE_URL });
const key = process.env.ONCELY_KEY;
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));
const failure = async (step, fn) => {
  try {
    await fn();
    out(step, { ok: true });
  } catch (e) {
    const body = typeof e.body === 'string' ? JSON.parse(e.body) : e.body;
    out(step, { ok: false, code: e.code, category: body?.category, message: body?.message });
  }
};

const created = await client.crm.contacts.basicApi.create({ properties: { email: 'plain@example.com', firstname: 'Plain' }, associations: [] });
out('create', { id: created.id, email: created.properties.email });

for (const step of ['upsert1', 'upsert2']) {
  const res = await client.crm.contacts.batchApi.upsert({
    inputs: [{ idProperty: 'oncely_key', id: key, properties: { email: 'ada@example.com', firstname: 'Ada' } }],
  });
  out(step, { status: res.status, id: res.results[0].id, new: res.results[0]._new ?? res.results[0]['new'] });
}

const got = await client.crm.contacts.basicApi.getById(key, ['email', 'oncely_key'], undefined, undefined, false, 'oncely_key');
out('get', { id: got.id, email: got.properties.email, key: got.properties.oncely_key });

const updated = await client.crm.contacts.basicApi.update(key, { properties: { firstname: 'Augusta' } }, 'oncely_key');
out('update', { id: updated.id, firstname: updated.properties.firstname });

const deal = await client.crm.deals.batchApi.upsert({
  inputs: [{ idProperty: 'oncely_key', id: key + '-deal', properties: { dealname: 'Renewal', amount: '1200.50' } }],
});
out('deal', { id: deal.results[0].id, amount: deal.results[0].properties.amount });

await failure('absent', () => client.crm.contacts.basicApi.getById('nobody', undefined, undefined, undefined, false, 'oncely_key'));
await failure('invalid', () => client.crm.contacts.batchApi.upsert({ inputs: [{ idProperty: 'oncely_key', id: 'k2', properties: { email: 'nope' } }] }));
await failure('conflict', () => client.crm.contacts.basicApi.create({ properties: { email: 'ada@example.com' }, associations: [] }));
await failure('unmodelled', () => client.crm.companies.basicApi.create({ properties: { name: 'Acme' }, associations: [] }));
