// The official `openai` npm client against a live `serve` on the bundled tiny model.
// Run by CTest (test_openai_npm) after scripts/test.sh has run `npm ci` here:
//   SERVE_BIN=build/serve node tests/npm/openai_client.test.mjs
// Starts serve on a free port with an API key, checks what a JavaScript client relies on
// (chat, streaming with usage, completions, n, seeds, stop, the SDK's error classes), then
// stops it with SIGTERM and expects exit code 0.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

let OpenAI;
try {
  OpenAI = (await import('openai')).default;
} catch (e) {
  // CTest reports exit code 77 as skipped; scripts/test.sh always installs the package.
  console.error('the openai package is not installed: run `npm ci` in tests/npm (scripts/test.sh does)');
  process.exit(77);
}

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const serveBin = process.env.SERVE_BIN || join(root, 'build', 'serve');
const reference = JSON.parse(readFileSync(join(root, 'tests/data/tiny-qwen35/reference.json'), 'utf8'));
// Case 0's 24 greedy tokens hold no special token, so its text is what the server returns.
const case0 = reference.chat[0];
const KEY = 'npm-test-key';
const MODEL = 'tiny-qwen35';

let server;
let serverLog = '';
let client;

before(async () => {
  server = spawn(serveBin, ['--port', '0', '--kv-cache-memory', '64MiB', '--max-num-seqs', '8', '--api-key', KEY],
                 { stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('serve did not become ready:\n' + serverLog)), 120000);
    const onData = (d) => {
      serverLog += d.toString();
      const m = serverLog.match(/listening on http:\/\/[^ ]*:(\d+)/);
      if (m && serverLog.includes('ready:')) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${serverLog}`)));
  });
  client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120000 });
});

after(async () => {
  if (!server || server.exitCode !== null) return;
  const code = await new Promise((resolve) => {
    server.removeAllListeners('exit');
    server.on('exit', (c, sig) => resolve(c === null ? sig : c));
    server.kill('SIGTERM');
  });
  assert.equal(code, 0, 'serve exits 0 on SIGTERM');
});

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
