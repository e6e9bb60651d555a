// The shared part of verify.mjs and resolve.mjs: an @a2a-js/sdk signature
// verifier whose keys come from a JWKS file, and a loop that reports one
// JSON line per card and exits 0 only when every card verified.
import { readFileSync } from "node:fs";
import { verifyAgentCardSignature } from "@a2a-js/sdk";

// The SDK logs each failed signature entry with console.debug; keep stdout
// for results.
console.debug = () => {};

// verifierFor returns verifyAgentCardSignature over the keys of jwksFile.
export function verifierFor(jwksFile) {
  const jwks = JSON.parse(readFileSync(jwksFile, "utf8"));
  return verifyAgentCardSignature(async (kid) => {
    const key = jwks.keys.find((k) => k.kid === kid);
    if (!key) throw new Error(`kid ${kid} not in JWKS`);
    return key;
  });
}

// verifyEach runs check(item) for every item, prints {[label]: item, ok,
// error} per item, and exits 1 if any failed.
export async function verifyEach(label, items, check) {
  let failed = 0;
  for (const item of items) {
    try {
      await check(item);
      console.log(JSON.stringify({ [label]: item, ok: true }));
    } catch (err) {
      failed++;
      console.log(JSON.stringify({ [label]: item, ok: false, error: String(err && err.message ? err.message : err) }));
    }
  }
  process.exit(failed === 0 ? 0 : 1);
}
