// Resolves Agent Cards the way an A2A client of @a2a-js/sdk does: its own
// DefaultAgentCardResolver fetches the card over HTTP, then
// verifyAgentCardSignature checks it.
// node resolve.mjs JWKS.json BASE_URL PATH [PATH...]
// Prints one JSON line {"path","ok","error"} per card and exits 0 only when
// every card verified.
import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";
import { verifierFor, verifyEach } from "./jwks-verifier.mjs";

const [jwksFile, baseUrl, ...paths] = process.argv.slice(2);
if (!jwksFile || !baseUrl || paths.length === 0) {
  console.error("usage: node resolve.mjs JWKS.json BASE_URL PATH...");
  process.exit(2);
}
const verify = verifierFor(jwksFile);
const resolver = new DefaultAgentCardResolver();
await verifyEach("path", paths, async (path) => verify(await resolver.resolve(baseUrl, path)));
