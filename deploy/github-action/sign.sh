#!/usr/bin/env bash
# Step 2 of the Action: sign INPUT_CARD through cardsignd with the job's
# OIDC identity token. cardsign asks GitHub's token endpoint for a token
# with INPUT_AUDIENCE itself (--id-token-audience; see `cardsign sign
# --help`), so the token never passes through this script, a file or the
# log. The signed card goes to INPUT_OUTPUT; the signatures' kids and audit
# records come from cardsign's --result-file.
#
# Environment: INPUT_CARD, INPUT_SERVER, INPUT_AUDIENCE, INPUT_CA_FILE or
# INPUT_CA, INPUT_OUTPUT, INPUT_VERIFY, INPUT_JWKS_URL, INPUT_REGISTER, INPUT_AGENT_ID, INPUT_VISIBILITY,
# INPUT_INSTALL_ONLY, CARDSIGN_PATH (step 1's output), and the runner's ACTIONS_ID_TOKEN_REQUEST_URL and
# ACTIONS_ID_TOKEN_REQUEST_TOKEN, RUNNER_TEMP, GITHUB_OUTPUT.
# Outputs: signed-card, kids, audit-sequence, audit-sequences, agent-id,
# agent-version, result-file.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bool install-only "${INPUT_INSTALL_ONLY:-false}"
if [ "${INPUT_INSTALL_ONLY:-false}" = true ]; then
  echo "install-only: cardsign is installed, nothing signed"
  exit 0
fi

card=${INPUT_CARD:-} server=${INPUT_SERVER:-} audience=${INPUT_AUDIENCE:-}
[ -n "$card" ] || fail "input card is required: the path of the unsigned Agent Card"
[ -n "$server" ] || fail "input server is required: cardsignd's gRPC address HOST:PORT (several replicas: HOST:PORT,HOST:PORT)"
[ -n "$audience" ] || fail "input audience is required: the audience cardsignd's auth.oidc issuer for GitHub expects"
one_line card "$card"
one_line server "$server"
one_line audience "$audience"
[ -f "$card" ] || fail "input card: $(q "$card") is not a file"
if [ -z "${ACTIONS_ID_TOKEN_REQUEST_URL:-}" ] || [ -z "${ACTIONS_ID_TOKEN_REQUEST_TOKEN:-}" ]; then
  fail "this job cannot request an OIDC identity token: give it \`permissions: id-token: write\` (in the job or the workflow). Pull requests from forks never get one."
fi
bool register "${INPUT_REGISTER:-false}"
# Step 3's inputs are checked here too: a mistake there is reported before
# cardsignd signs and records a card that nobody will verify.
bool verify "${INPUT_VERIFY:-false}"
if [ "${INPUT_VERIFY:-false}" = true ] && [ -z "${INPUT_JWKS_URL:-}" ]; then
  fail "input verify is true but jwks-url is empty: give the JWKS URL cardsignd publishes (https://HOST/.well-known/jwks.json)"
fi
output=${INPUT_OUTPUT:-}
if [ -z "$output" ]; then
  output="${card%.json}.signed.json"
fi
one_line output "$output"

args=(sign --server "$server" --id-token-audience "$audience")
ca=$(ca_file)
if [ -n "$ca" ]; then
  args+=(--ca-file "$ca")
else
  args+=(--tls) # the system roots: the OIDC token is never sent in clear
fi
if [ "${INPUT_REGISTER:-false}" = true ]; then
  args+=(--register)
  [ -z "${INPUT_AGENT_ID:-}" ] || args+=(--agent "$INPUT_AGENT_ID")
  [ -z "${INPUT_VISIBILITY:-}" ] || args+=(--visibility "$INPUT_VISIBILITY")
elif [ -n "${INPUT_AGENT_ID:-}" ] || [ -n "${INPUT_VISIBILITY:-}" ]; then
  fail "inputs agent-id and visibility go with register: true"
fi
result="$RUNNER_TEMP/cardsign-result-$$.json"
args+=(--result-file "$result" -- "$card")

echo "signing $(q "$card") through cardsignd at $(q "$server") (OIDC audience $(q "$audience"))"
# Written beside the target, then renamed: a failed signature leaves no
# half-written card behind.
if ! "${CARDSIGN_PATH:-cardsign}" "${args[@]}" >"$output.tmp"; then
  rm -f "$output.tmp"
  fail "cardsignd did not sign $(q "$card"): see cardsign's message above"
fi
mv "$output.tmp" "$output"

command -v jq >/dev/null || fail "jq is needed to read cardsign's result (GitHub-hosted runners have it; install it on a self-hosted runner)"
kids=$(jq -r '[.signatures[].kid] | unique | join(",")' "$result")
seqs=$(jq -r '[.signatures[].audit_sequence] | map(tostring) | join(",")' "$result")
set_output signed-card "$output"
set_output kids "$kids"
set_output audit-sequence "${seqs%%,*}"
set_output audit-sequences "$seqs"
set_output agent-id "$(jq -r '.agent_id // ""' "$result")"
set_output agent-version "$(jq -r '.agent_version // ""' "$result")"
set_output result-file "$result"
echo "signed $(q "$output"): kids $(q "$kids"), audit records $(q "$seqs")"
