// Builds the ES modules the console host double's import map names, from the
// React packages `.ci/run` installs with npm: React ships CommonJS only, and
// the console resolves `react`, `react-dom`, `react-dom/client` and
// `react/jsx-runtime` as ES modules. One esbuild run with code splitting
// keeps a single copy of React shared by the four modules (a second copy
// breaks hooks).
//
// Usage: node react-esm.mjs <deps dir holding node_modules> <out dir>
import { createRequire } from "node:module";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const [deps, out] = process.argv.slice(2).map((p) => resolve(p));
if (!deps || !out) {
  console.error("usage: node react-esm.mjs <deps dir> <out dir>");
  process.exit(2);
}
const require = createRequire(join(deps, "package.json"));
const { build } = require("esbuild");

// Each specifier becomes one entry that re-exports the CommonJS module's
// names as ES exports, plus the module itself as the default export.
const SPECIFIERS = {
  react: "react",
  "react-dom": "react-dom",
  "react-dom-client": "react-dom/client",
  "react-jsx-runtime": "react/jsx-runtime",
};
const entries = join(deps, "esm-entries");
mkdirSync(entries, { recursive: true });
const entryPoints = {};
for (const [name, specifier] of Object.entries(SPECIFIERS)) {
  const names = Object.keys(require(specifier)).filter(
    (n) => /^[A-Za-z_$][\w$]*$/.test(n) && n !== "default",
  );
  const file = join(entries, `${name}.js`);
  writeFileSync(
    file,
    `import M from ${JSON.stringify(specifier)};\nexport default M;\n` +
      (names.length ? `export const { ${names.join(", ")} } = M;\n` : ""),
  );
  entryPoints[name] = file;
}
await build({
  entryPoints,
  outdir: out,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "browser",
  target: ["es2020"],
  define: { "process.env.NODE_ENV": '"production"' },
  nodePaths: [join(deps, "node_modules")],
  logLevel: "warning",
});
console.log(`wrote ${Object.keys(entryPoints).join(", ")} to ${out}`);
