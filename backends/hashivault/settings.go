package hashivault

// This file is built whatever the build tags: what a binary needs to
// register the backend (Scheme, Config) is here, and the rest of the
// package, or its stub in no_hashivault.go, supplies Constructor and
// NotBuilt.

import (
	"log/slog"
	"net/http"
	"time"
)

// Scheme is the URI scheme of Transit keys: hashivault://KEY[/VERSION],
// the name cosign gives it, so that users recognise it.
const Scheme = "hashivault"

// DefaultRateLimit is the per-key signing rate when Config.RateLimit is 0.
// Vault has no per-key quota of its own; this keeps one busy key from
// taking a shared cluster's capacity. Raise it for a dedicated cluster.
const DefaultRateLimit = 100

// DefaultAttemptTimeout bounds one request to Vault when
// Config.AttemptTimeout is 0.
const DefaultAttemptTimeout = 10 * time.Second

// DefaultMount is the Transit mount path when Config.Mount is "".
const DefaultMount = "transit"

// Auth methods.
const (
	AuthToken      = "token"
	AuthAppRole    = "approle"
	AuthKubernetes = "kubernetes"
)

// DefaultKubernetesJWTFile is the service account token a pod is given,
// which Kubernetes auth sends when Auth.JWTFile is "".
const DefaultKubernetesJWTFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// Config configures a Backend.
type Config struct {
	// Address is Vault's (or OpenBao's) URL, https://vault.example:8200.
	// "" takes BAO_ADDR or VAULT_ADDR. http is accepted for loopback
	// addresses only: a token must never travel in clear.
	Address string
	// Namespace is the Vault Enterprise / OpenBao namespace of the Transit
	// mount and the auth methods ("" for the root namespace, or
	// BAO_NAMESPACE / VAULT_NAMESPACE).
	Namespace string
	// Mount is the Transit mount path; "" means DefaultMount.
	Mount string
	// Key is the Transit key Create rotates (creating it, of the type the
	// requested alg needs, when it does not exist). "" means the backend
	// cannot create keys.
	Key string
	// CAFile, if set, is a PEM bundle of the CAs that sign Vault's
	// certificate (BAO_CACERT / VAULT_CACERT otherwise).
	CAFile string
	// Auth says how the backend logs in.
	Auth Auth
	// RateLimit caps signatures per second per key (a token bucket holding
	// a second's worth); 0 means DefaultRateLimit, +Inf none.
	RateLimit float64
	// AttemptTimeout bounds each request; 0 means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Logger receives logins, renewals, key creation (Info), retries
	// (Debug) and give-ups (Warn); nil means slog.Default(). Tokens and
	// secret IDs are never logged.
	Logger *slog.Logger
	// HTTPClient, if set, replaces the client's HTTP client (tests).
	HTTPClient *http.Client
}

// Auth is how the backend gets its Vault token. The secrets are values,
// read by the caller from files or the environment; none is logged.
type Auth struct {
	// Method is AuthToken (the default), AuthAppRole or AuthKubernetes.
	Method string
	// MountPath is the auth method's mount ("" for approle or kubernetes).
	MountPath string
	// Token is the token of AuthToken ("" takes TokenFile, else BAO_TOKEN
	// / VAULT_TOKEN). A renewable token is renewed before it expires.
	Token string
	// TokenFile, for AuthToken, is read for the token at the first call and
	// again whenever Vault refuses the token or it expires: a Vault Agent
	// sink rewrites it.
	TokenFile string
	// RoleID and SecretID log in with AuthAppRole.
	RoleID, SecretID string
	// Role and JWTFile log in with AuthKubernetes: the service account
	// token is read from JWTFile (DefaultKubernetesJWTFile when "") at
	// every login, as kubelet rotates it.
	Role, JWTFile string
}
