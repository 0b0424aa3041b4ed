// Builds the dashboard into web/dist (git-ignored), which the server serves at / (--web-dir):
//   dist/index.html             from src/index.html, with the bundle's hashed names filled in
//   dist/assets/main-HASH.js    src/main.js and everything it imports (uPlot included), minified
//   dist/assets/main-HASH.css   src/style.css and uPlot's stylesheet
// Hashed names let the server cache /assets/ for a year (immutable); index.html is revalidated.
// Usage: node build.mjs   (npm run build). Exits non-zero on any build error.
import * as esbuild from 'esbuild';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });

const result = await esbuild.build({
  entryPoints: [path.join(here, 'src/main.js')],
  bundle: true,
  minify: true,
  sourcemap: true,
  format: 'esm',
  // Debian 12's Chromium and any browser of the last few years.
  target: ['chrome100', 'firefox100', 'safari15'],
  outdir: path.join(dist, 'assets'),
  entryNames: '[name]-[hash]',
  metafile: true,
  logLevel: 'warning',
});

// The output names, by extension, of the one entry point.
const outputs = Object.keys(result.metafile.outputs).map((p) => path.relative(dist, p));
const js = outputs.find((p) => p.endsWith('.js'));
const css = outputs.find((p) => p.endsWith('.css'));
if (!js || !css) throw new Error(`build: expected a .js and a .css output, got ${outputs}`);

const template = await readFile(path.join(here, 'src/index.html'), 'utf8');
const html = template.replace('{{CSS}}', `/${css}`).replace('{{JS}}', `/${js}`);
await writeFile(path.join(dist, 'index.html'), html);
console.log(`web/dist: index.html, ${js}, ${css}`);
