package main

// connectingHelp explains the connection flags the commands that talk to
// cardsignd share (sign --server, keys, agents, audit, bench): the CLI
// reference prints it once, above the flags' table.
const connectingHelp = `The commands that talk to cardsignd (sign --server, keys, agents, audit, bench) share the flags below.

The credential, first found wins: --token-file; --id-token or --id-token-env (naming both kinds is an
error); $CARDSIGN_TOKEN; then, unless a client certificate is configured (--cert-file or
$CARDSIGN_CERT_FILE: the certificate is the credential, and an identity token lying around is not sent):
$CARDSIGN_ID_TOKEN; in GitHub Actions ($ACTIONS_ID_TOKEN_REQUEST_URL and $ACTIONS_ID_TOKEN_REQUEST_TOKEN,
set by permissions: id-token: write) when an audience is given, a token requested for it; the file in
$CARDSIGN_ID_TOKEN_FILE; /var/run/secrets/tokens/cardsign when it exists (the Kubernetes projected path).
A token that is not shaped like a JWT is refused before any call; errors name where a credential came
from, never the credential.

Without a TLS flag, cardsign talks plain gRPC, and only to a loopback address (127.0.0.1, ::1, localhost);
for any other server pass --ca-file or --tls. A bearer token is never sent in clear text over the network.
TLS 1.2 is the minimum. Keep token files private (chmod 600): cardsign warns when group or others can read
one. On UNAUTHENTICATED or PERMISSION_DENIED (signer for sign and bench, admin for keys, auditor for audit
and key listing) cardsign adds a hint on what to pass.

    cardsign sign --server cardsign.internal:7700 --ca-file ca.pem --token-file release.token agent-card.json > signed.json
    cardsign keys list --server cardsign.internal:7700 --ca-file ca.pem --cert-file admin.pem --key-file admin-key.pem
    export CARDSIGN_SERVER=cardsign.internal:7700 CARDSIGN_CA_FILE=/etc/cardsign/ca.pem
    CARDSIGN_TOKEN="$(cat auditor.token)" cardsign audit verify

Several replicas: --server (and $CARDSIGN_SERVER) takes the addresses of several cardsignd replicas
separated by commas, or one DNS name with several A/AAAA records. cardsign then spreads calls over the
replicas (gRPC round_robin), skips a replica that is down or reports NOT_SERVING on the gRPC health service
(cardsignd does so while its readiness check fails and while it shuts down), and retries a call that failed
with UNAVAILABLE on another replica, up to 4 attempts with 0.25–2s backoff; it says on standard error when
a call took more than one attempt. Only calls that are safe to repeat are retried: SignCard (a retried
signature is one more audited signature), VerifyCard, LintCard, listing keys and audit records. Key
administration is not retried, so a lost answer never rotates twice: check with keys list and repeat by
hand. A single IP address is used as is, with no balancing, health checking or retries.

With TLS each replica's certificate is verified against the host of its own entry; for one name with
several addresses, against that name. When the replicas' certificates hold a shared service name instead,
pass it with --server-name. Without TLS every entry must be a loopback address. An entry that is not
HOST:PORT (empty, a port that is not a number, an unbracketed IPv6 address, a repeated entry) is refused
before anything is dialed, with the entry named.

    cardsign sign --server cs1.internal:7700,cs2.internal:7700,cs3.internal:7700 \
        --ca-file ca.pem --token-file release.token agent-card.json > signed.json
    # or one name with an A record per replica (e.g. a Kubernetes headless Service)
    cardsign sign --server cardsign.cardsign.svc.cluster.local:7700 --ca-file ca.pem --token-file release.token agent-card.json`
