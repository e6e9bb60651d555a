#!/usr/bin/env bash
# Step 3 of the Action: with INPUT_VERIFY true, verify the signed card
# against the JWKS cardsignd publishes (INPUT_JWKS_URL), as a client of the
# card would. When cardsignd's certificate comes from a private CA (input ca
# or ca-file), cardsign verify --ca-file trusts that CA in addition to the
# system roots for the fetch, so a JWKS served behind a public certificate
# verifies too.
#
# Environment: INPUT_VERIFY, INPUT_JWKS_URL, INPUT_CA_FILE or INPUT_CA,
# INPUT_INSTALL_ONLY, SIGNED_CARD and CARDSIGN_PATH (outputs of steps 1 and
# 2), and the runner's RUNNER_TEMP, GITHUB_OUTPUT.
# Output: verified (true, or false when verification was not asked for).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bool verify "${INPUT_VERIFY:-false}"
bool install-only "${INPUT_INSTALL_ONLY:-false}"
if [ "${INPUT_VERIFY:-false}" = false ] || [ "${INPUT_INSTALL_ONLY:-false}" = true ]; then
  set_output verified false
  exit 0
fi
jwks=${INPUT_JWKS_URL:-}
[ -n "$jwks" ] || fail "input verify is true but jwks-url is empty: give the JWKS URL cardsignd publishes (https://HOST/.well-known/jwks.json)"
one_line jwks-url "$jwks"
[[ $jwks == https://* ]] || fail "input jwks-url must be an https URL, got $(q "$jwks")"
signed=${SIGNED_CARD:-}
[ -f "$signed" ] || fail "no signed card to verify ($(q "$signed"))"

ca=$(ca_file)
ca_args=()
[ -z "$ca" ] || ca_args=(--ca-file "$ca")
echo "verifying $(q "$signed") against $(q "$jwks")"
"${CARDSIGN_PATH:-cardsign}" verify --jwks "$jwks" "${ca_args[@]}" -- "$signed" >/dev/null ||
  fail "the signed card $(q "$signed") does not verify against $(q "$jwks"): see cardsign's message above"
set_output verified true
