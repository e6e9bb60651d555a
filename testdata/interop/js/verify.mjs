// Verifies Agent Cards with the shipped @a2a-js/sdk verifier, the way an A2A
// client would: node verify.mjs JWKS.json CARD.json [CARD.json...]
// Prints one JSON line per card {"file","ok","error"} and exits 0 only when
// every card verified.
import { readFileSync } from "node:fs";
import { verifierFor, verifyEach } from "./jwks-verifier.mjs";

const [jwksFile, ...cards] = process.argv.slice(2);
if (!jwksFile || cards.length === 0) {
  console.error("usage: node verify.mjs JWKS.json CARD.json...");
  process.exit(2);
}
const verify = verifierFor(jwksFile);
await verifyEach("file", cards, (file) => verify(JSON.parse(readFileSync(file, "utf8"))));
