// Prints @a2a-js/sdk's canonical bytes for each card, the payload its
// verifyAgentCardSignature checks: node canonicalize.mjs CARD.json...
// One JSON line per card: {"file","canonical"} or {"file","error"}.
import { readFileSync } from "node:fs";
import { canonicalizeAgentCard } from "@a2a-js/sdk";

for (const file of process.argv.slice(2)) {
  try {
    const card = JSON.parse(readFileSync(file, "utf8"));
    console.log(JSON.stringify({ file, canonical: canonicalizeAgentCard(card) }));
  } catch (err) {
    console.log(JSON.stringify({ file, error: String(err) }));
  }
}
