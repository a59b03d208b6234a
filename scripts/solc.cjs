#!/usr/bin/env node
// A native-solc command line over solcjs (the npm `solc` package, WebAssembly).
//
// Why: no native solc can be downloaded here, but py-solc-x, ape-solidity and forge all
// drive solc through two calls only: `--version` and `--standard-json` (input on stdin,
// output on stdout). This script answers exactly those, resolving imports against
// --base-path / --include-path / --allow-paths the way native solc does, and refuses
// everything else with a message instead of guessing.
'use strict';
const fs = require('fs');
const path = require('path');

function loadSolc() {
  try {
    return require('solc');
  } catch (e) {
    process.stderr.write(
      'solc shim: the npm package `solc` is not installed next to this script.\n' +
      'Fix: run `npm ci` in the repository root (scripts/bootstrap.sh does it).\n');
    process.exit(2);
  }
}

function parseArgs(argv) {
  const opts = { mode: null, roots: [], unknown: [] };
  const takesValue = new Set(['--base-path', '--include-path', '--allow-paths']);
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let val = null;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) { val = a.slice(eq + 1); a = a.slice(0, eq); }
    if (a === '--version') opts.mode = 'version';
    else if (a === '--standard-json') opts.mode = 'standard-json';
    else if (takesValue.has(a)) {
      if (val === null) val = argv[++i];
      if (val === undefined) { opts.unknown.push(a + ' (missing value)'); continue; }
      for (const p of val.split(',')) if (p) opts.roots.push(path.resolve(p));
    } else if (a === '-') { /* stdin marker */ }
    else opts.unknown.push(argv[i]);
  }
  return opts;
}

function makeImportResolver(roots) {
  const allowed = roots.length ? roots : [process.cwd()];
  const inside = (file) => allowed.some((r) => file === r || file.startsWith(r + path.sep));
  return function findImports(unitName) {
    const candidates = path.isAbsolute(unitName)
      ? [unitName]
      : [...allowed.map((r) => path.join(r, unitName)), path.resolve(unitName)];
    for (const file of candidates) {
      if (!inside(path.resolve(file))) continue;
      try {
        return { contents: fs.readFileSync(file, 'utf8') };
      } catch (e) { /* try the next root */ }
    }
    return { error: `File not found: ${unitName} (searched: ${allowed.join(', ')})` };
  };
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const solc = loadSolc();
  if (opts.mode === 'version') {
    process.stdout.write('solc, the solidity compiler commandline interface\n');
    process.stdout.write(`Version: ${solc.version()}\n`);
    return;
  }
  if (opts.mode !== 'standard-json' || opts.unknown.length) {
    process.stderr.write(
      `solc shim: unsupported arguments: ${opts.unknown.join(' ') || '(no mode)'}\n` +
      'This shim supports only --version and --standard-json ' +
      '[--base-path P] [--include-path P] [--allow-paths P,...]. Use standard JSON input.\n');
    process.exit(2);
  }
  const input = fs.readFileSync(0, 'utf8');
  const output = solc.compile(input, { import: makeImportResolver(opts.roots) });
  process.stdout.write(output);
}

main();
