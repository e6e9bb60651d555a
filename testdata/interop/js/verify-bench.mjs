// The peer of scripts/bench's verification figure: @a2a-js/sdk's
// verifyAgentCardSignature in process, ES256, one sequential loop over one
// card signed once with a fresh P-256 key: the signed card's JSON bytes in
// (parse), verified against the public key as a JWK (what a client takes
// from a JWKS), as an A2A client checking a fetched card would.
// node verify-bench.mjs CARD.json [SECONDS] [WARMUP_SECONDS]
// Prints KEY=value lines: N, SECONDS, RATE (verifications/s), US_PER_CARD
// (wall), CPU_US_PER_CARD (process user+system CPU, all threads), IN_BYTES.
import { readFileSync } from "node:fs";
import { webcrypto } from "node:crypto";
import { exportJWK } from "jose";
import { generateAgentCardSignature, verifyAgentCardSignature } from "@a2a-js/sdk";

const [file, secondsArg = "10", warmupArg = "2"] = process.argv.slice(2);
if (!file) {
  console.error("usage: node verify-bench.mjs CARD.json [SECONDS] [WARMUP_SECONDS]");
  process.exit(2);
}
const seconds = Number(secondsArg);
const warmup = Number(warmupArg);

const { privateKey, publicKey } = await webcrypto.subtle.generateKey(
  { name: "ECDSA", namedCurve: "P-256" },
  true,
  ["sign", "verify"],
);
const sign = generateAgentCardSignature(privateKey, { alg: "ES256", typ: "JOSE", kid: "bench" });
const signed = await sign(JSON.parse(readFileSync(file, "utf8")));
const input = new TextEncoder().encode(JSON.stringify(signed)); // the signed card's JSON bytes
const jwk = await exportJWK(publicKey);
const verify = verifyAgentCardSignature(async () => jwk);
const decoder = new TextDecoder();

async function loop(ms) {
  const end = performance.now() + ms;
  let n = 0;
  while (performance.now() < end) {
    await verify(JSON.parse(decoder.decode(input))); // throws when it does not verify
    n++;
  }
  return n;
}

await loop(warmup * 1000);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const n = await loop(seconds * 1000);
const elapsed = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);

const out = (k, v) => console.log(`${k}=${v}`);
out("N", n);
out("SECONDS", elapsed.toFixed(3));
out("RATE", (n / elapsed).toFixed(1));
out("US_PER_CARD", ((elapsed * 1e6) / n).toFixed(2));
out("CPU_US_PER_CARD", ((cpu.user + cpu.system) / n).toFixed(2));
out("IN_BYTES", input.length);
