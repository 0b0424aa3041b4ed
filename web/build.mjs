// Builds the dashboard into web/dist (git-ignored), which the server serves at / (--web-dir):
//   dist/index.html             from src/index.html, with the bundle's hashed names filled in
//   dist/assets/main-HASH.js    src/main.js and everything it imports (uPlot included), minified
//   dist/assets/main-HASH.css   src/style.css and uPlot's stylesheet
//   dist/login.html             from src/login.html: the login page the server serves at /login
//   dist/assets/login-HASH.{js,css}  src/login.js (the form's script) and src/style.css
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
  entryPoints: [path.join(here, 'src/main.js'), path.join(here, 'src/login.js')],
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

// Each entry point's script and stylesheet (output names relative to dist), filled into its page.
const outputs = result.metafile.outputs;
async function page(entry, template, target) {
  const [js, out] = Object.entries(outputs).find(([, o]) => o.entryPoint === `src/${entry}`) || [];
  if (!js || !out.cssBundle) throw new Error(`build: expected a .js and a .css output for src/${entry}`);
  const [jsName, cssName] = [js, out.cssBundle].map((p) => path.relative(dist, p));
  const html = (await readFile(path.join(here, 'src', template), 'utf8'))
    .replace('{{CSS}}', `/${cssName}`).replace('{{JS}}', `/${jsName}`);
  await writeFile(path.join(dist, target), html);
  return `${target}: ${jsName}, ${cssName}`;
}
console.log(`web/dist: ${await page('main.js', 'index.html', 'index.html')}; ${await page('login.js', 'login.html', 'login.html')}`);
