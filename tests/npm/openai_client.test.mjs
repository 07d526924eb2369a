// The official `openai` npm client against a live `serve` on the bundled tiny model.
// Run by CTest (test_openai_npm) after scripts/test.sh has run `npm ci` here:
//   SERVE_BIN=build/serve SCRIPTED_SERVE_BIN=build/scripted_serve node tests/npm/openai_client.test.mjs
// Starts serve on a free port with an API key, checks what a JavaScript client relies on
// (chat, streaming with usage, completions, n, seeds, stop, the SDK's error classes, the
// Responses API whole and streamed), then stops it with SIGTERM and expects exit code 0. A
// function tool's round trip through responses.create runs against scripted_serve, whose
// model calls the tool.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { KEY, MODEL, case0, importOrSkip, startWithClients, stopServers, weatherSchema } from './harness.mjs';

const OpenAI = await importOrSkip('openai');

let servers;
let client;
let toolClient;

before(async () => {
  ({ servers, client, toolClient } = await startWithClients(
    (baseURL) => new OpenAI({ baseURL, apiKey: KEY, maxRetries: 0, timeout: 120000 }), '/v1'));
});

after(() => stopServers(servers));

test('chat completion: the reference greedy reply', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: case0.messages, temperature: 0, max_tokens: 24,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, case0.greedy_text);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens, case0.prompt_ids.length);
  assert.equal(r.usage.completion_tokens, 24);
  assert.equal(r.usage.total_tokens, case0.prompt_ids.length + 24);
});

test('streaming with include_usage: deltas add up, usage arrives last with no choices', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages: case0.messages, temperature: 0, max_tokens: 24,
    stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) {
      assert.equal(chunk.choices.length, 0);
      usage = chunk.usage;
      continue;
    }
    text += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.ok(chunks > 3);
  assert.equal(text, case0.greedy_text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 24);
});

test('completions', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(r.choices[0].text.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 5);
});

test('n = 2 gives two independent choices; a seed reproduces them', async () => {
  const req = { model: MODEL, messages: case0.messages, temperature: 1.0, max_tokens: 12, n: 2, seed: 77 };
  const a = await client.chat.completions.create(req);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1]);
  assert.notEqual(a.choices[0].message.content, a.choices[1].message.content);
  const b = await client.chat.completions.create(req);
  assert.deepEqual(b.choices.map((c) => c.message.content), a.choices.map((c) => c.message.content));
  const c = await client.chat.completions.create({ ...req, seed: 78 });
  assert.notDeepEqual(c.choices.map((x) => x.message.content), a.choices.map((x) => x.message.content));
});

test('stop strings end the reply before the match', async () => {
  const at = case0.greedy_text.indexOf('ONTIS');
  assert.ok(at > 0);
  const r = await client.chat.completions.create({
    model: MODEL, messages: case0.messages, temperature: 0, max_tokens: 24, stop: ['ONTIS'],
  });
  assert.equal(r.choices[0].message.content, case0.greedy_text.slice(0, at));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('response_format json_schema: the reply parses and fits the schema', async () => {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } },
                   required: ['ok', 'n'], additionalProperties: false };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'JSON' }], temperature: 1, seed, max_tokens: 120,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
      chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const v = JSON.parse(r.choices[0].message.content);
    assert.equal(typeof v.ok, 'boolean');
    assert.ok(Number.isInteger(v.n) && v.n >= 0 && v.n <= 9);
    assert.deepEqual(Object.keys(v).sort(), ['n', 'ok']);
  }
  const o = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'JSON' }], max_tokens: 8, response_format: { type: 'json_object' },
    chat_template_kwargs: { enable_thinking: false },
  });
  assert.ok(o.choices[0].message.content.startsWith('{'));
});

test('tool_choice required and named: the reply is a call of the tool, arguments by its schema', async () => {
  const tools = [
    { type: 'function', function: { name: 'get_time', parameters: { type: 'object',
      properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } }, required: ['zone'] } } },
    { type: 'function', function: { name: 'roll', parameters: { type: 'object',
      properties: { sides: { type: 'integer', minimum: 2, maximum: 20 } }, required: ['sides'] } } },
  ];
  const choices = ['required', { type: 'function', function: { name: 'roll' } }];
  for (const tool_choice of choices) {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Call a tool' }], tools, tool_choice, temperature: 1,
      seed: 4, max_tokens: 120, parallel_tool_calls: false, chat_template_kwargs: { enable_thinking: false },
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    const args = JSON.parse(call.function.arguments);
    if (typeof tool_choice === 'object') assert.equal(call.function.name, 'roll');
    if (call.function.name === 'roll') assert.ok(Number.isInteger(args.sides) && args.sides >= 2 && args.sides <= 20);
    else assert.ok(['UTC', 'CET'].includes(args.zone));
  }
});

test('a bad parameter is a BadRequestError (400) naming the field', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: case0.messages, temperature: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature',
  );
  await assert.rejects(
    client.completions.create({ model: MODEL, prompt: 'x', echo: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'echo',
  );
});

test('a wrong API key is an AuthenticationError (401)', async () => {
  const bad = new OpenAI({ baseURL: client.baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(
    bad.chat.completions.create({ model: MODEL, messages: case0.messages, max_tokens: 2 }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401,
  );
});

test('an unknown model is a NotFoundError (404)', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-nothing', messages: case0.messages, max_tokens: 2 }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404,
  );
});

test('responses.create: the reference greedy reply as a message item, cut by max_output_tokens', async () => {
  const r = await client.responses.create({ model: MODEL, input: case0.messages, temperature: 0, max_output_tokens: 24 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output_text, case0.greedy_text);
  assert.equal(r.usage.input_tokens, case0.prompt_ids.length);
  assert.equal(r.usage.output_tokens, 24);
  assert.equal(r.usage.total_tokens, case0.prompt_ids.length + 24);
});

test('responses.create with stream: text deltas add up; created first, incomplete last', async () => {
  const stream = await client.responses.create({
    model: MODEL, input: case0.messages, temperature: 0, max_output_tokens: 24, stream: true,
  });
  const types = [];
  let text = '';
  let final = null;
  let sequence = 0;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, sequence++);
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.incomplete') final = ev.response;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.incomplete');
  assert.ok(types.includes('response.output_item.added') && types.includes('response.output_item.done'));
  assert.equal(text, case0.greedy_text);
  assert.equal(final.output[0].content[0].text, case0.greedy_text);
  assert.equal(final.usage.output_tokens, 24);
});

test('responses: a function tool call, streamed with the SDK helper, then its output fed back', async () => {
  const tools = [{ type: 'function', name: 'get_weather', description: 'Weather forecast', parameters: weatherSchema, strict: false }];
  const input = [{ role: 'user', content: 'Weather in Paris?' }];
  const r = await toolClient.responses.create({ model: MODEL, input, tools, max_output_tokens: 200 });
  assert.equal(r.status, 'completed');
  assert.deepEqual(r.output.map((i) => i.type), ['reasoning', 'message', 'function_call']);
  assert.equal(r.output[0].content[0].text, 'The user wants the weather.\n');
  assert.equal(r.output_text, 'Checking.\n');
  const call = r.output[2];
  assert.equal(call.name, 'get_weather');
  assert.match(call.call_id, /^call_/);
  assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris', days: 2 });
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);

  const stream = toolClient.responses.stream({ model: MODEL, input, tools, max_output_tokens: 200 });
  let args = '';
  let textDeltas = '';
  stream.on('response.function_call_arguments.delta', (e) => { args += e.delta; });
  stream.on('response.output_text.delta', (e) => { textDeltas += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(final.status, 'completed');
  assert.equal(textDeltas, 'Checking.\n');
  assert.deepEqual(JSON.parse(args), { city: 'Paris', days: 2 });
  assert.equal(final.output[2].arguments, args);

  // Stateless: the client sends the output items back with the function's output.
  const r2 = await toolClient.responses.create({
    model: MODEL, tools, max_output_tokens: 8,
    input: [...input, ...r.output, { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 24 C' }],
  });
  assert.ok(['completed', 'incomplete'].includes(r2.status));
  assert.ok(r2.usage.input_tokens > r.usage.input_tokens);
});

test('responses: what needs stored responses is a BadRequestError naming the field', async () => {
  await assert.rejects(
    client.responses.create({ model: MODEL, input: 'hi', previous_response_id: 'resp_123' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id',
  );
  await assert.rejects(
    client.responses.create({ model: MODEL, input: 'hi', store: true }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'store',
  );
  // A forced call is sampled under the tool-call grammar (structured outputs): accepted.
  const forced = await client.responses.create({
    model: MODEL, input: 'hi', tool_choice: 'required', max_output_tokens: 4,
    tools: [{ type: 'function', name: 'f', parameters: {}, strict: false }],
  });
  assert.ok(['completed', 'incomplete'].includes(forced.status));
  await assert.rejects(
    client.responses.create({ model: MODEL, input: 'hi', text: { format: { type: 'xml' } } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'text.format',
  );
});
