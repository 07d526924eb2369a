// What the npm client tests share: the client package (or a skip), the reference case, and
// the two servers they talk to -- `serve` on the bundled tiny model, and `scripted_serve`
// (tests/server/scripted_serve.cpp: a model that writes a fixed text) whose model reasons and
// calls get_weather, for tool calls a random-weight model never makes. Both require KEY.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const serveBin = process.env.SERVE_BIN || join(root, 'build', 'serve');
const scriptedServeBin = process.env.SCRIPTED_SERVE_BIN || join(root, 'build', 'scripted_serve');

export const KEY = 'npm-test-key';
export const MODEL = 'tiny-qwen35';
// Case 0 of the tiny model's reference: its 24 greedy tokens hold no special token, so its
// text is what the server returns.
export const case0 = JSON.parse(readFileSync(join(root, 'tests/data/tiny-qwen35/reference.json'), 'utf8')).chat[0];

// The package's default export; without the package, exit 77 (CTest reports it as skipped;
// scripts/test.sh always installs the packages).
export async function importOrSkip(pkg) {
  try {
    return (await import(pkg)).default;
  } catch (e) {
    console.error(`the ${pkg} package is not installed: run \`npm ci\` in tests/npm (scripts/test.sh does)`);
    process.exit(77);
  }
}

// Starts `bin args` and resolves once it is ready: {port, stop()}; stop() sends SIGTERM and
// resolves with the exit code (or the signal's name).
async function startServer(bin, args) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${bin} did not become ready:\n${log}`)), 120000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[^ ]*:(\d+)/);
      if (m && log.includes('ready:')) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`${bin} exited with ${code}:\n${log}`)));
  });
  return {
    port,
    stop: () => {
      if (proc.exitCode !== null) return Promise.resolve(proc.exitCode);
      return new Promise((resolve) => {
        proc.removeAllListeners('exit');
        proc.on('exit', (c, sig) => resolve(c === null ? sig : c));
        proc.kill('SIGTERM');
      });
    },
  };
}

// The script that makes the scripted model reason, then call get_weather (Qwen's XML form).
const weatherScript =
  '<think>\nThe user wants the weather.\n</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n' +
  '<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>';

export const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string' }, days: { type: 'integer' } },
  required: ['city'],
};

// Both servers: {tiny, scripted}, each {port, stop()}.
export async function startServers() {
  const [tiny, scripted] = await Promise.all([
    startServer(serveBin, ['--port', '0', '--kv-cache-memory', '64MiB', '--max-num-seqs', '8', '--api-key', KEY]),
    startServer(scriptedServeBin, ['--api-key', KEY, weatherScript]),
  ]);
  return { tiny, scripted };
}

// Both servers and a client of each, made by make(baseURL of the server):
// {servers, client (the tiny model's), toolClient (the scripted model's)}.
export async function startWithClients(make, path = '') {
  const servers = await startServers();
  return {
    servers,
    client: make(`http://127.0.0.1:${servers.tiny.port}${path}`),
    toolClient: make(`http://127.0.0.1:${servers.scripted.port}${path}`),
  };
}

// Stops both with SIGTERM; each must exit 0.
export async function stopServers(servers) {
  if (!servers) return;
  assert.equal(await servers.scripted.stop(), 0, 'scripted_serve exits 0 on SIGTERM');
  assert.equal(await servers.tiny.stop(), 0, 'serve exits 0 on SIGTERM');
}
