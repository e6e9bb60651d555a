// Verifies Agent Cards with the shipped @a2a-js/sdk verifier, the way an A2A
// client would: node verify.mjs JWKS.json CARD.json [CARD.json...]
// Prints one JSON line per card {"file","ok","error"} and exits 0 only when
// every card verified.
import { readFileSync } from "node:fs";
import { verifyAgentCardSignature } from "@a2a-js/sdk";

// The SDK logs each failed signature entry with console.debug; keep stdout
// for results.
console.debug = () => {};

const [jwksFile, ...cards] = process.argv.slice(2);
if (!jwksFile || cards.length === 0) {
  console.error("usage: node verify.mjs JWKS.json CARD.json...");
  process.exit(2);
}
const jwks = JSON.parse(readFileSync(jwksFile, "utf8"));
const verify = verifyAgentCardSignature(async (kid) => {
  const key = jwks.keys.find((k) => k.kid === kid);
  if (!key) throw new Error(`kid ${kid} not in JWKS`);
  return key;
});

let failed = 0;
for (const file of cards) {
  const card = JSON.parse(readFileSync(file, "utf8"));
  try {
    await verify(card);
    console.log(JSON.stringify({ file, ok: true }));
  } catch (err) {
    failed++;
    console.log(JSON.stringify({ file, ok: false, error: String(err && err.message ? err.message : err) }));
  }
}
process.exit(failed === 0 ? 0 : 1);
