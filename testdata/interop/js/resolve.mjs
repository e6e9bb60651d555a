// Resolves Agent Cards the way an A2A client of @a2a-js/sdk does: its own
// DefaultAgentCardResolver fetches the card over HTTP, then
// verifyAgentCardSignature checks it.
// node resolve.mjs JWKS.json BASE_URL PATH [PATH...]
// Prints one JSON line {"path","ok","error"} per card and exits 0 only when
// every card verified.
import { readFileSync } from "node:fs";
import { verifyAgentCardSignature } from "@a2a-js/sdk";
import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";

// The SDK logs each failed signature entry with console.debug; keep stdout
// for results.
console.debug = () => {};

const [jwksFile, baseUrl, ...paths] = process.argv.slice(2);
if (!jwksFile || !baseUrl || paths.length === 0) {
  console.error("usage: node resolve.mjs JWKS.json BASE_URL PATH...");
  process.exit(2);
}
const jwks = JSON.parse(readFileSync(jwksFile, "utf8"));
const verify = verifyAgentCardSignature(async (kid) => {
  const key = jwks.keys.find((k) => k.kid === kid);
  if (!key) throw new Error(`kid ${kid} not in JWKS`);
  return key;
});
const resolver = new DefaultAgentCardResolver();

let failed = 0;
for (const path of paths) {
  try {
    const card = await resolver.resolve(baseUrl, path);
    await verify(card);
    console.log(JSON.stringify({ path, ok: true }));
  } catch (err) {
    failed++;
    console.log(JSON.stringify({ path, ok: false, error: String(err && err.message ? err.message : err) }));
  }
}
process.exit(failed === 0 ? 0 : 1);
