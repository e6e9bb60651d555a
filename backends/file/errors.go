package file

import "github.com/cardsign/cardsign/backends"

// KeyNotFoundError reports a key file that does not exist (deleted, moved,
// or a wrong path). It matches backends.ErrKeyNotFound, which the daemon
// maps to NOT_FOUND naming the key, and unwraps to the *fs.PathError, so
// errors.Is(err, fs.ErrNotExist) holds too. Its message is the cause's,
// which names the path.
type KeyNotFoundError struct {
	Path string // the path of the URI
	Err  error
}

func (e *KeyNotFoundError) Error() string { return e.Err.Error() }
func (e *KeyNotFoundError) Unwrap() error { return e.Err }

// Is makes every *KeyNotFoundError match backends.ErrKeyNotFound.
func (e *KeyNotFoundError) Is(target error) bool { return target == backends.ErrKeyNotFound }
