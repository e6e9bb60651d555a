package main

// The long help of the commands (command.long): what a command does beyond
// its summary, usage and flags. help prints it after the usage, and the CLI
// reference (docs/reference/cli.md) renders it: plain text, paragraphs
// separated by blank lines, indented lines shown as they are.

const canonicalizeLong = `Prints exactly the canonical bytes a signature covers, with no trailing newline: the card in its
v1.0 shape, serialized by RFC 8785 under the chosen profile (default spec).

    $ echo '{"name":"Example Agent","description":"","capabilities":{"streaming":false,"pushNotifications":false,"extensions":[]},"skills":[]}' | cardsign canonicalize -
    {"capabilities":{"pushNotifications":false,"streaming":false},"description":"","name":"Example Agent","skills":[]}`

const lintLong = `Reports every finding with its path, the rule and a fix. A card that passes also gets the signing
plan: the signatures cardsign sign and cardsignd will add, why each one beyond the first, and which
verifiers the signed card will satisfy. lint reports a malformed card as a finding and exits 1: for
lint, that is an error found.

    $ cardsign lint testdata/cards/unicode.json
    signing adds 2 signature(s):
      spec: A2A §8.4.1 canonical bytes
      python-ascii: for a2a-python ≤1.1, which writes these otherwise: name (non-ASCII text), description (non-ASCII text), …
    verifies after signing in: spec ✔  @a2a-js/sdk ≥1.3 ✔  a2a-python ≥1.2 ✔  a2a-python ≤1.1 ✔  @a2a-js/sdk resolver ✔`

const upgradeLong = `Prints the card in the v1.0 shape; standard error lists each change the mapping made.`

const signLong = `Offline (--key): signs with your key URIs (file:, pkcs11:, gcpkms:, awskms:); repeat --key to sign
with several keys. --kid and --alg apply to a single --key; --jku (https, plain http only for loopback)
goes in the protected header; --lifetime D puts iat and exp (now + D) in every signature's protected
header.

Through cardsignd (--server, or $CARDSIGN_SERVER): signs with the daemon's active key, and its pending
key during a rotation, under its policy; every signature is audited. Notes, warnings and each
signature's audit sequence go to standard error. --register keeps the signed card in the registry as
the agent's next version (--agent ID, default derived from the card's first interface URL;
--visibility public|private, default private for a new agent, unchanged for a known one); standard
error then names the agent and version. The connection flags are described under Connecting to
cardsignd.

When a signing policy rule holds the card for approval (docs/policy.md), nothing is signed: sign
prints the approval's id and exits 4; approvers run cardsign approvals approve ID. Then sign the same
card again with --approval ID, or let --wait do it: it polls the approval every 3 s, prints each new
approval, and signs once the rule's count is reached (exit 1 if it is denied, expires, or
--wait-timeout passes). A wait outlives identity tokens: when cardsignd refuses the credential, sign
obtains it again as at the start (the --id-token file read anew, or a token requested from GitHub
Actions again), and an unreachable daemon is asked again at the next poll.

Exit codes: 0 signed; 1 refused or failed; 2 usage, unreadable input, or the daemon unreachable;
4 held for approval.

Both: --profile chooses the canonical profiles signed (default spec, plus sdk and python-ascii when
their bytes differ from those already signed); --strip-unknown removes keys outside the v1.0 schema
instead of refusing the card; --keep-signatures keeps the card's existing signatures instead of
replacing them.`

const verifyLong = `Each URL is fetched at most once per run. A signature's jku is followed only under an --allow-jku
prefix, compared and fetched in its normalized form (https://keys.example.com/jwks/../evil/jwks.json is
https://keys.example.com/evil/jwks.json, which is not under https://keys.example.com/jwks/); a jku that
redirects is not followed. Strings from the card (kid, alg, jku, reasons) are printed escaped.

--jwks http(s)://… also fetches the signed revocation document from the same host (--revocations
FILE|URL|none to choose), checks its signature against the JWKS and its expiry, and fails a signature
by a revoked key as revoked even when an old copy of the JWKS still lists that key.

--log-key KEY|FILE|URL names the transparency log's verifier key(s) (ORIGIN+HASH+BASE64, a file of them
one a line, or an http(s) URL such as cardsignd's /.well-known/cardsign-log-key): a signature then
counts only with an inclusion proof in its unprotected header that this log vouches for, of this very
signature over this very card. Take the key from a source you trust, not only from the server that
signed. Without --log-key a signature's proof is not checked; a card without proofs fails --log-key
with "carries no transparency-log inclusion proof".

    $ cardsign verify --jwks http://127.0.0.1:7701/.well-known/jwks.json --log-key http://127.0.0.1:7701/.well-known/cardsign-log-key signed.json
    signature[0] kid=k4mJXuuOgWq53g24f0QnF1Id9PF3sufJXAYxKWtj3kU alg=ES256: valid (spec profile), logged: cardsign.localhost/log leaf 0 of 1

verify --trust FILE https://HOST verifies an agent's card from https://HOST/.well-known/agent-card.json
against a trust policy file, did:web resolved over HTTPS: the trust policy format, every reason code,
safe fetching, --resolve and --at are described in docs/ai-catalog.md.`

const keygenLong = `Writes a new private key, PEM, with mode 0600 (an existing file is never overwritten) and prints its
public JWK. The algorithm is one of ES256 (default), ES384, ES512, RS256, PS256, EdDSA.`

const jwksLong = `Prints the public JWKS of the keys: kty crv x y n e kid alg use only, in deterministic bytes, so the
same keys always give the same document.`

const tokenLong = `token new makes a random bearer token (cst_ and 32 random bytes in base64url). It writes the token to
--out (created 0600; an existing file is never overwritten) or to standard output, and prints on standard
error the entry for cardsignd's config, which holds only the token's SHA-256:

    auth:
      tokens:
        - name: release-pipeline
          sha256: 79e7ed2318a69d3140e3251a90d9a25a1adcf039bd27134d8836571ad3acc200
          roles: [signer]

token hash prints the SHA-256 (hex) of a token made elsewhere (white space around it trimmed), for the
sha256 field.`

const keysLong = `Keys move through states derived from stored timestamps: pending (published, not signing), active
(the one signer), retired (published, verify only, for keys.retire_grace), expired (unpublished); any
state can become revoked (unpublished at once, listed in the revocation document, never published
again). keys rotate creates a key, published now, activating at now + keys.prepublish; until then
every new card carries two signatures (active and pending), so caches holding the old JWKS and the new
one both verify it. keys retire and keys revoke refuse the active key unless --force (signing then
stops with FAILED_PRECONDITION until a key is activated, e.g. with keys rotate --prepublish 0s).

A kid is 1–128 characters of A-Z a-z 0-9 . _ : -; --prepublish is 0 to 366 days. A revocation reason
is a code (unspecified, key-compromise, superseded, cessation-of-operation, affiliation-changed,
privilege-withdrawn), optionally followed by ": " and a note of at most 200 printable characters.
Once keys revoke has returned, no signature by that key is returned to anyone. Key administration is
never retried against another replica: check with keys list and repeat by hand.`

const agentsLong = `pull writes the newest signed card to --out through a temporary file and a rename (a web server
never reads half a card; mode 0644), and leaves the file alone when it already holds that card
(standard error says written or unchanged), for a cron job or a sidecar beside the agent's web server.
pull of a revoked card writes nothing and exits 1, naming the version, when it was revoked and why;
--allow-revoked writes it anyway, with a warning. show of a revoked card prints it with a note on
standard error. Exit 1 when the call fails (not found for an unknown agent or version).

Roles: list, show and history need reader, auditor or admin; remove and revoke need admin.

    */5 * * * * cardsign agents pull payments --out /srv/www/.well-known/agent-card.json --server cardsign.example.com:7700 --tls --token-file /etc/agent/reader.token`

const auditLong = `list prints one record per line with every field, the signature included, its outcome (signed,
refused with the reason, or an administrative record's kind such as key.revoke, with its reason and
detail), and for a caller with an identity token its provenance (the JSON text the hash covers).

verify walks the whole log and exits 1 at the first broken link. Given --jwks, it first reads the
signed revocation document (by default /.well-known/cardsign-revocations.json on the --jwks URL's host;
--revocations names another one, or a copy you kept) and checks its signature; the log must still hold
the document's audit_head record with that hash: a log that ends below it is reported as truncated,
another hash at that record as rewritten (exit 1). --head SEQ:HASH checks against a head you noted
yourself. Without either, the output says that a truncated tail cannot be detected. verify then lists
the keys and checks each against its last key administration record: a keys table edited outside
cardsignd is reported naming each key, field and record (exit 1).

verify --log URL --log-key KEY also checks the transparency log against the records: every entry must
be byte for byte the entry of its record, and the tree rebuilt from the entries must have the root of
the log's signed checkpoint.

    $ cardsign audit verify --server 127.0.0.1:7700 --jwks http://127.0.0.1:7701/.well-known/jwks.json
    audit chain intact: 34037 records, head 42f05010…
    key records agree with the audit trail: 3 keys
    checked against the published head record 34030 (hash 9c1d…) from http://127.0.0.1:7701/.well-known/cardsign-revocations.json (revocation document sequence 212, issued 2026-11-23T11:49:57Z): the log holds it
    $ cardsign audit verify --server 127.0.0.1:7700 --jwks jwks.json --revocations revocations-2026-10-01.json
    audit log truncated: the published head is record 30112 (hash 77ab…) but the log ends at record 30050`

const benchLong = `Sends SignCard from N goroutines for D (at most 10m), prints signs/s, p50 and p99, then signs the same
card in-process for comparison (with a fresh ES256 key, or --compare-key URI, e.g. the daemon's own
pkcs11: key) and prints the ratio.`

const approvalsLong = `A signing policy rule with outcome require_approval holds a card until approvers approve its exact
canonical bytes (README "Approvals"). sign answers with the approval's id (exit 4), or waits with --wait.

Approvers hold the approver role, are never the requester, and belong to the rule's group when it names
one. show prints what the card changes against the agent's previous registered card and the card
itself; approve --sha256 HEX pins the bytes you reviewed. Each approval, denial and request is an
audit record and a transparency-log leaf naming the approver and the card's SHA-256.

list shows everyone's approvals to approvers, auditors and admins, and a signer its own. An approval
expires after policy.approval_ttl (default 24h): it can then be neither approved nor used.

Exit codes: 0 done; 1 refused or failed (not found, not an approver, closed, expired); 2 usage.`

const eventsLong = `Every audit record of cardsignd (a signature, a refusal, a key or registry action, an approval step) is also
an event: a CloudEvents 1.0 JSON object whose id is the record's hash and whose data carries the record, its
sequence number and the hash of the record before it. cardsignd pushes them to the sinks of events.sinks
(signed webhooks, syslog, files); events tail pulls them, for shippers that read rather than receive.

tail prints the events from --from SEQ (1: the whole log) or the last --last N (default 10), then, with
--follow, each new record as it is committed; a stream a replica drops is resumed after the last event
printed. --json prints each event's CloudEvent JSON on its own line, as a webhook receives it. It needs the
auditor role.

secret makes a Standard Webhooks secret (whsec_ and 32 random bytes in base64) for a webhook sink's
secret_files and for the receiver that verifies its requests.`
