// The peer of scripts/bench: @a2a-js/sdk's generateAgentCardSignature in
// process, ES256, one sequential loop: card JSON bytes in (parse), signed
// card JSON bytes out (stringify + encode), as an A2A server signing its own
// card would. node sign-bench.mjs CARD.json [SECONDS] [WARMUP_SECONDS] [MODE]
// MODE "sign" (the default) signs only; "sign+verify" also verifies each
// signed card with verifyAgentCardSignature (parsed from its output bytes),
// the work cardsign's signer does on every sign (it verifies what it signs).
// Prints KEY=value lines: N, SECONDS, RATE (signs/s), US_PER_CARD (wall),
// CPU_US_PER_CARD (process user+system CPU, all threads), OUT_BYTES.
// One signed card is verified with verifyAgentCardSignature afterwards.
import { readFileSync } from "node:fs";
import { webcrypto } from "node:crypto";
import { exportJWK } from "jose";
import { generateAgentCardSignature, verifyAgentCardSignature } from "@a2a-js/sdk";

const [file, secondsArg = "10", warmupArg = "2", mode = "sign"] = process.argv.slice(2);
if (!file || (mode !== "sign" && mode !== "sign+verify")) {
  console.error("usage: node sign-bench.mjs CARD.json [SECONDS] [WARMUP_SECONDS] [sign|sign+verify]");
  process.exit(2);
}
const seconds = Number(secondsArg);
const warmup = Number(warmupArg);
const input = readFileSync(file); // the card's JSON bytes

// A WebCrypto key: what jose uses natively, no per-call key conversion.
const { privateKey, publicKey } = await webcrypto.subtle.generateKey(
  { name: "ECDSA", namedCurve: "P-256" },
  true,
  ["sign", "verify"],
);
const kid = "bench";
const sign = generateAgentCardSignature(privateKey, { alg: "ES256", typ: "JOSE", kid });
const decoder = new TextDecoder();
const encoder = new TextEncoder();
// The verifier of the sign+verify mode and of the final check: the public
// key as a JWK, as a client fetches it from a JWKS.
const jwk = await exportJWK(publicKey);
const verify = verifyAgentCardSignature(async () => jwk);

async function once() {
  const card = JSON.parse(decoder.decode(input));
  const signed = await sign(card);
  const out = encoder.encode(JSON.stringify(signed));
  if (mode === "sign+verify") {
    await verify(JSON.parse(decoder.decode(out))); // throws when it does not verify
  }
  return out;
}

async function loop(ms) {
  const end = performance.now() + ms;
  let n = 0;
  let last;
  while (performance.now() < end) {
    last = await once();
    n++;
  }
  return { n, last };
}

await loop(warmup * 1000);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const { n, last } = await loop(seconds * 1000);
const elapsed = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);

await verify(JSON.parse(decoder.decode(last))); // throws when the peer's card does not verify

const out = (k, v) => console.log(`${k}=${v}`);
out("N", n);
out("SECONDS", elapsed.toFixed(3));
out("RATE", (n / elapsed).toFixed(1));
out("US_PER_CARD", ((elapsed * 1e6) / n).toFixed(2));
out("CPU_US_PER_CARD", ((cpu.user + cpu.system) / n).toFixed(2));
out("OUT_BYTES", last.length);
out("MODE", mode === "sign" ? 0 : 1);
