# Helpers the Action's scripts source (install.sh, sign.sh, verify.sh). Every
# value an input or cardsign supplies is printed escaped (printf %q), so that
# it can neither forge a workflow command (::set-output, ::add-mask) nor hide
# in a log line.

# fail prints an error annotation and exits 1. Workflow commands end at a
# line break and read %, CR and LF as escapes: escape them as the runner
# expects.
fail() {
  local msg="$*"
  msg=${msg//'%'/'%25'}
  msg=${msg//$'\r'/'%0D'}
  msg=${msg//$'\n'/'%0A'}
  echo "::error title=cardsign::$msg"
  exit 1
}

# q quotes a value for a message.
q() { printf '%q' "$1"; }

# set_output NAME VALUE appends NAME to $GITHUB_OUTPUT in the multi-line
# form with a random delimiter, as actions/core does: a value with a line
# break cannot set another output.
set_output() {
  local delim
  delim="ghadelimiter_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  [[ $2 == *"$delim"* ]] && fail "output $1: value contains the delimiter"
  printf '%s<<%s\n%s\n%s\n' "$1" "$delim" "$2" "$delim" >>"$GITHUB_OUTPUT"
}

# bool NAME VALUE checks that a boolean input is exactly true or false.
bool() {
  case $2 in
    true | false) ;;
    *) fail "input $1 must be true or false, got $(q "$2")" ;;
  esac
}

# one_line NAME VALUE refuses a value with a line break: inputs that are
# paths or addresses never have one, and one would end up in an output.
one_line() {
  [[ $2 == *[$'\n\r']* ]] && fail "input $1 must be one line, got $(q "$2")"
  return 0
}

# ca_file prints the path of the PEM CA file for cardsignd's certificate,
# from input ca-file or, with input ca (PEM content), a file written under
# $RUNNER_TEMP; nothing when neither is given (the system roots then).
ca_file() {
  if [ -n "${INPUT_CA_FILE:-}" ] && [ -n "${INPUT_CA:-}" ]; then
    fail "inputs ca-file and ca exclude each other: give the CA as a file or as PEM content"
  fi
  if [ -n "${INPUT_CA_FILE:-}" ]; then
    one_line ca-file "$INPUT_CA_FILE"
    [ -f "$INPUT_CA_FILE" ] || fail "input ca-file: $(q "$INPUT_CA_FILE") is not a file"
    printf '%s\n' "$INPUT_CA_FILE"
  elif [ -n "${INPUT_CA:-}" ]; then
    [[ $INPUT_CA == *"-----BEGIN CERTIFICATE-----"* ]] || fail "input ca must be PEM certificates (-----BEGIN CERTIFICATE-----)"
    local f="$RUNNER_TEMP/cardsign-ca.pem"
    printf '%s\n' "$INPUT_CA" >"$f"
    printf '%s\n' "$f"
  fi
}
