// A scripted session of Slack's official Node client against the fake
// (SLACK_API_URL, SLACK_TOKEN, SLACK_CHANNEL). It prints one JSON line per
// step; the Go test reads them and the fake's journal.
import { WebClient, LogLevel } from '@slack/web-api';

const web = new WebClient(process.env.SLACK_TOKEN, {
  slackApiUrl: process.env.SLACK_API_URL,
  logLevel: LogLevel.ERROR,
  retryConfig: { retries: 0 },
  rejectRateLimitedCalls: true,
});
const channel = process.env.SLACK_CHANNEL;
const key = process.env.ONCELY_KEY;
const out = (step, value) => console.log(JSON.stringify({ step, ...value }));
const failure = async (step, fn) => {
  try {
    await fn();
    out(step, { ok: true });
  } catch (e) {
    out(step, { ok: false, code: e.code, error: e.data?.error ?? e.message });
  }
};

const posted = await web.chat.postMessage({
  channel,
  text: 'Deploy finished',
  metadata: { event_type: 'oncely_action', event_payload: { oncely_key: key } },
});
out('post', { ok: posted.ok, channel: posted.channel, ts: posted.ts, key: posted.message?.metadata?.event_payload?.oncely_key });

const second = await web.chat.postMessage({ channel: '#general', text: 'Second', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '*Second*' } }] });
out('post2', { ok: second.ok, channel: second.channel });

const page1 = await web.conversations.history({ channel, include_all_metadata: true, limit: 1 });
out('history1', { count: page1.messages.length, text: page1.messages[0].text, has_more: page1.has_more, cursor: page1.response_metadata?.next_cursor ?? '' });

const page2 = await web.conversations.history({ channel, include_all_metadata: true, limit: 1, cursor: page1.response_metadata.next_cursor });
out('history2', { count: page2.messages.length, key: page2.messages[0].metadata?.event_payload?.oncely_key, has_more: page2.has_more });

const bare = await web.conversations.history({ channel, oldest: posted.ts, inclusive: true });
out('history3', { count: bare.messages.length, metadata: bare.messages.some((m) => m.metadata !== undefined) });

await failure('no_channel', () => web.chat.postMessage({ channel: 'C404', text: 'x' }));
await failure('no_text', () => web.chat.postMessage({ channel }));
await failure('bad_metadata', () => web.chat.postMessage({ channel, text: 'x', metadata: { event_payload: {} } }));
await failure('unmodelled', () => web.chat.update({ channel, ts: posted.ts, text: 'edited' }));
await failure('unmodelled_param', () => web.chat.postMessage({ channel, text: 'x', thread_ts: posted.ts }));

// Slack drops metadata whose event_type has a period: the message is
// posted, without it, with an invalid_metadata_schema warning.
const dotted = await web.chat.postMessage({ channel, text: 'Dotted', metadata: { event_type: 'oncely.action', event_payload: { oncely_key: key + '-dotted' } } });
out('dotted', { ok: dotted.ok, warning: dotted.warning ?? '', warnings: (dotted.response_metadata?.warnings ?? []).join(','), metadata: dotted.message?.metadata !== undefined });
