// The official `@anthropic-ai/sdk` npm client against a live `serve` on the bundled tiny model
// (POST /v1/messages, /v1/messages/count_tokens), and against `scripted_serve` for tool use
// (its model reasons and calls get_weather). Run by CTest (test_anthropic_npm) after
// scripts/test.sh has run `npm ci` here:
//   SERVE_BIN=build/serve SCRIPTED_SERVE_BIN=build/scripted_serve node tests/npm/anthropic_client.test.mjs
// Both servers require an API key: the SDK sends it as x-api-key (apiKey) or as a Bearer
// token (authToken), as Claude Code does with ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { KEY, MODEL, case0, importOrSkip, startWithClients, stopServers, weatherSchema } from './harness.mjs';

const Anthropic = await importOrSkip('@anthropic-ai/sdk');
// Thinking enabled renders the prompt as the reference did (the template's default).
const THINKING = { type: 'enabled', budget_tokens: 1024 };

let servers;
let client;
let toolClient;

before(async () => {
  ({ servers, client, toolClient } = await startWithClients(
    (baseURL) => new Anthropic({ baseURL, apiKey: KEY, maxRetries: 0, timeout: 120000 }), ''));
});

after(() => stopServers(servers));

test('messages.create: the reference greedy reply as a text block', async () => {
  const msg = await client.messages.create({
    model: MODEL, max_tokens: 24, temperature: 0, thinking: THINKING, messages: case0.messages,
  });
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.match(msg.id, /^msg_/);
  assert.deepEqual(msg.content, [{ type: 'text', text: case0.greedy_text }]);
  assert.equal(msg.stop_reason, 'max_tokens');
  assert.equal(msg.stop_sequence, null);
  assert.equal(msg.usage.input_tokens + msg.usage.cache_read_input_tokens, case0.prompt_ids.length);
  assert.equal(msg.usage.output_tokens, 24);
});

test('messages.stream: the text events and finalMessage carry the same reply', async () => {
  const stream = client.messages.stream({
    model: MODEL, max_tokens: 24, temperature: 0, thinking: THINKING, messages: case0.messages,
  });
  let text = '';
  let events = 0;
  stream.on('text', (delta) => { text += delta; events++; });
  const msg = await stream.finalMessage();
  assert.ok(events > 3);
  assert.equal(text, case0.greedy_text);
  assert.deepEqual(msg.content, [{ type: 'text', text: case0.greedy_text }]);
  assert.equal(msg.stop_reason, 'max_tokens');
  assert.equal(msg.usage.output_tokens, 24);
  assert.equal(msg.usage.input_tokens + msg.usage.cache_read_input_tokens, case0.prompt_ids.length);
});

test('messages.create with stream: the raw event sequence', async () => {
  const stream = await client.messages.create({
    model: MODEL, max_tokens: 5, temperature: 0, messages: case0.messages, stream: true,
  });
  const types = [];
  for await (const ev of stream) types.push(ev.type);
  assert.equal(types[0], 'message_start');
  assert.equal(types[1], 'content_block_start');
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.ok(types.slice(2, -3).every((t) => t === 'content_block_delta'));
});

test('stop_sequences end the reply before the match with stop_reason stop_sequence', async () => {
  const at = case0.greedy_text.indexOf('ONTIS');
  assert.ok(at > 0);
  const msg = await client.messages.create({
    model: MODEL, max_tokens: 24, temperature: 0, thinking: THINKING, messages: case0.messages, stop_sequences: ['ONTIS'],
  });
  assert.equal(msg.content[0].text, case0.greedy_text.slice(0, at));
  assert.equal(msg.stop_reason, 'stop_sequence');
  assert.equal(msg.stop_sequence, 'ONTIS');
});

test('tool use: thinking and a tool_use block, streamed with the SDK helpers, then the tool_result', async () => {
  const tools = [{ name: 'get_weather', description: 'Weather forecast', input_schema: weatherSchema }];
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const req = { model: MODEL, max_tokens: 200, tools, thinking: THINKING, messages };
  const msg = await toolClient.messages.create(req);
  assert.equal(msg.stop_reason, 'tool_use');
  assert.deepEqual(msg.content.map((b) => b.type), ['thinking', 'text', 'tool_use']);
  assert.equal(msg.content[0].thinking, 'The user wants the weather.\n');
  assert.equal(msg.content[1].text, 'Checking.\n');
  const use = msg.content[2];
  assert.match(use.id, /^toolu_/);
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'Paris', days: 2 });

  const stream = toolClient.messages.stream(req);
  let json = '';
  let thinking = '';
  let lastSnapshot = null;
  stream.on('thinking', (delta) => { thinking += delta; });
  stream.on('inputJson', (partial, snapshot) => { json += partial; lastSnapshot = snapshot; });
  const final = await stream.finalMessage();
  assert.equal(thinking, 'The user wants the weather.\n');
  assert.deepEqual(JSON.parse(json), { city: 'Paris', days: 2 });
  assert.deepEqual(lastSnapshot, { city: 'Paris', days: 2 });
  assert.equal(final.stop_reason, 'tool_use');
  assert.deepEqual(final.content[2].input, { city: 'Paris', days: 2 });

  // The assistant turn goes back as returned, with the tool's result.
  const followUp = [
    ...messages,
    { role: 'assistant', content: msg.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny, 24 C' }] },
  ];
  const msg2 = await toolClient.messages.create({ ...req, max_tokens: 8, messages: followUp });
  const counted = await toolClient.messages.countTokens({ model: MODEL, tools, thinking: THINKING, messages: followUp });
  assert.equal(msg2.usage.input_tokens + msg2.usage.cache_read_input_tokens, counted.input_tokens);
  assert.ok(counted.input_tokens > msg.usage.input_tokens + msg.usage.cache_read_input_tokens);
});

test('errors: the SDK error classes, Anthropic error bodies', async () => {
  await assert.rejects(
    client.messages.create({ model: MODEL, messages: case0.messages }),  // no max_tokens
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400 && e.error.error.type === 'invalid_request_error',
  );
  // A forced tool call is sampled under the tool-call grammar (structured outputs): accepted.
  const forced = await client.messages.create({
    model: MODEL, max_tokens: 4, messages: case0.messages, tool_choice: { type: 'any' },
    tools: [{ name: 'f', input_schema: { type: 'object' } }],
  });
  assert.equal(forced.type, 'message');
  await assert.rejects(
    client.messages.create({
      model: MODEL, max_tokens: 4, messages: case0.messages, tool_choice: { type: 'tool', name: 'nope' },
      tools: [{ name: 'f', input_schema: { type: 'object' } }],
    }),
    (e) => e instanceof Anthropic.BadRequestError && /nope/.test(e.message),
  );
  await assert.rejects(
    client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 4, messages: case0.messages }),
    (e) => e instanceof Anthropic.NotFoundError && e.error.error.type === 'not_found_error',
  );
  const wrong = new Anthropic({ baseURL: client.baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(
    wrong.messages.create({ model: MODEL, max_tokens: 2, messages: case0.messages }),
    (e) => e instanceof Anthropic.AuthenticationError && e.status === 401,
  );
  // The key as a Bearer token (ANTHROPIC_AUTH_TOKEN) works too.
  const bearer = new Anthropic({ baseURL: client.baseURL, apiKey: null, authToken: KEY, maxRetries: 0 });
  const msg = await bearer.messages.create({ model: MODEL, max_tokens: 2, messages: case0.messages });
  assert.equal(msg.usage.output_tokens, 2);
});
