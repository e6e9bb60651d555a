package jose

import (
	"errors"
	"fmt"
)

// ErrSignatureInvalid means the signature math failed: the signature does not
// match the key and the signing input. It is distinct from errors about a
// wrong key type or an unsupported alg, which say the check could not be made.
var ErrSignatureInvalid = errors.New("jose: signature invalid")

// ErrVerify is matched (errors.Is) by every *VerifyError.
var ErrVerify = errors.New("jose: signature made by the signer does not verify with its public key")

// VerifyError is returned by Sign when the signature a signer produced does
// not verify against the signer's own public key. That points at the backend
// (a KMS key version that is not the one configured, a faulty HSM, a signer
// whose Public does not match its private key), and such a signature must
// never leave the process (DESIGN §4).
type VerifyError struct {
	Alg     Alg
	KeyType string
	Err     error // why verification failed; usually wraps ErrSignatureInvalid
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("jose: %s signature from %s signer does not verify with its public key: %v", e.Alg, e.KeyType, e.Err)
}

// Unwrap returns the verification failure.
func (e *VerifyError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrVerify) true for every *VerifyError.
func (e *VerifyError) Is(target error) bool { return target == ErrVerify }
