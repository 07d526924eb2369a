// Every example of README.md runs as written against `serve` on the bundled model (CTest
// test_readme_examples): the fenced blocks are read from the README itself, so an example that
// drifts from the server fails here. What runs:
//   * every ```sh block that calls the server with curl (curl made strict: --fail-with-body, so
//     an HTTP error fails the block, and -S so it says why);
//   * every ```js block (ES modules; the official `openai` and `@anthropic-ai/sdk` packages of
//     tests/npm, which scripts/test.sh installs);
//   * every ```python block, when python3 can import `openai` and `anthropic` (PyPI is not
//     reachable in CI and Debian packages neither SDK, so there they are reported as skipped;
//     each has a JavaScript twin that runs).
// The examples use port 8080 (scripts/run.sh's); the test serves on a free port and rewrites
// `:8080` to it. The image and video examples (those that read `shot.png` or `clip.mp4`) go to
// a second server on the vision-language fixture (tests/data/tiny-qwen35-vl; the bundled model
// has no vision tower), with one of the fixture's images as shot.png and its clip as clip.mp4
// in the working directory of every block.
// Without node packages the JS blocks cannot run: exit 77 (CTest: skipped).
//   SERVE_BIN=build/serve node tests/docs/readme_examples.test.mjs
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const serveBin = process.env.SERVE_BIN || join(root, 'build', 'serve');
const nodeModules = join(root, 'tests', 'npm', 'node_modules');

const readme = readFileSync(join(root, 'README.md'), 'utf8');
const blocks = [];
for (const m of readme.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)) {
  const line = readme.slice(0, m.index).split('\n').length;
  blocks.push({ lang: m[1], code: m[2], line });
}
const curlBlocks = blocks.filter((b) => ['sh', 'bash'].includes(b.lang) && /\bcurl\b/.test(b.code) && /:8080\b/.test(b.code));
const jsBlocks = blocks.filter((b) => ['js', 'javascript', 'mjs'].includes(b.lang));
const pyBlocks = blocks.filter((b) => b.lang === 'python');

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exitCode = 1;
}

// The README must keep its examples: this test is only worth something while it finds them.
const curlCalls = curlBlocks.reduce((n, b) => n + (b.code.match(/\bcurl\b/g) || []).length, 0);
if (curlCalls < 10) fail(`only ${curlCalls} curl calls found in README.md`);
if (jsBlocks.length < 2) fail(`only ${jsBlocks.length} JavaScript examples found in README.md`);
if (pyBlocks.length !== jsBlocks.length) fail(`${pyBlocks.length} Python examples but ${jsBlocks.length} JavaScript twins`);

// Starts serve on a free port (the README's server: the bundled model, or the given one; no
// API key); resolves {port, stop()}.
function startServe(model = []) {
  const proc = spawn(serveBin, [...model, '--port', '0', '--kv-cache-memory', '256MiB', '--max-num-seqs', '16'],
                     { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not become ready:\n${log}`)), 120000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/[^ ]*:(\d+)/);
      if (m && log.includes('ready:')) {
        clearTimeout(timer);
        resolve({
          port: Number(m[1]),
          log: () => log,
          stop: () => new Promise((r) => { proc.on('exit', (c) => r(c)); proc.kill('SIGTERM'); }),
        });
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${log}`)));
  });
}

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 120000, ...opts });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

const usesImage = (b) => /\b(shot\.png|clip\.mp4)\b/.test(b.code);
if (!blocks.some(usesImage)) fail('no image examples (reading shot.png) found in README.md');
const server = await startServe();
const vlServer = await startServe(['--model', join(root, 'tests', 'data', 'tiny-qwen35-vl')]);
const here = (b) => b.code.replace(/(localhost|127\.0\.0\.1):8080\b/g,
                                   `$1:${usesImage(b) ? vlServer.port : server.port}`);
const port = `${server.port} (images: ${vlServer.port})`;
const work = mkdtempSync(join(tmpdir(), 'ds-readme-'));
copyFileSync(join(root, 'tests', 'data', 'tiny-qwen35-vl', 'images', 'square96.png'), join(work, 'shot.png'));
copyFileSync(join(root, 'tests', 'data', 'tiny-qwen35-vl', 'videos', 'clip64x48_4fps.mp4'), join(work, 'clip.mp4'));
let ran = 0;
let skipped = 0;
try {
  for (const b of curlBlocks) {
    // Strict curl for every call of the block; a failure anywhere (pipes included) fails it.
    const script = `set -eo pipefail\ncurl() { command curl --fail-with-body -S --max-time 60 "$@"; }\n${here(b)}`;
    const r = run('bash', ['-c', script], { cwd: work });
    if (!r.ok) fail(`README.md:${b.line} (sh) failed:\n${r.out}`);
    else ran++;
  }

  const havePackages = existsSync(join(nodeModules, 'openai')) && existsSync(join(nodeModules, '@anthropic-ai', 'sdk'));
  if (havePackages) {
    symlinkSync(nodeModules, join(work, 'node_modules'), 'dir');
    jsBlocks.forEach((b, i) => {
      const file = join(work, `example_${i}.mjs`);
      writeFileSync(file, here(b));
      const r = run(process.execPath, [file], { cwd: work });
      if (!r.ok) fail(`README.md:${b.line} (js) failed:\n${r.out}`);
      else ran++;
    });
  } else {
    console.error(`the JavaScript examples need the npm packages: run \`npm ci\` in tests/npm (scripts/test.sh does)`);
  }

  const py = run('python3', ['-c', 'import openai, anthropic']);
  if (py.ok) {
    pyBlocks.forEach((b, i) => {
      const file = join(work, `example_${i}.py`);
      writeFileSync(file, here(b));
      const r = run('python3', [file], { cwd: work });
      if (!r.ok) fail(`README.md:${b.line} (python) failed:\n${r.out}`);
      else ran++;
    });
  } else {
    skipped += pyBlocks.length;
    console.log(`skipped ${pyBlocks.length} Python examples: python3 cannot import openai and anthropic here ` +
                `(their JavaScript twins ran)`);
  }
  console.log(`README examples: ${ran} blocks ran (${curlCalls} curl calls), ${skipped} skipped, against serve on port ${port}`);
  for (const s of [server, vlServer]) {
    const code = await s.stop();
    if (code !== 0) fail(`serve exited with ${code} on SIGTERM`);
  }
  if (!havePackages && !process.exitCode) process.exitCode = 77;
} finally {
  rmSync(work, { recursive: true, force: true });
}
