// Package invoker says who gpuprof runs for: the user who ran sudo, where
// gpuprof runs as root by sudo, else its real user. The targets it
// attaches to by default and the files it overwrites are theirs.
package invoker

import (
	"os"
	"strconv"
)

// UID is the invoking user's ID: $SUDO_UID where gpuprof's real user is
// root, else the real user's.
func UID() int {
	uid := os.Getuid()
	if uid == 0 {
		if n, err := strconv.Atoi(os.Getenv("SUDO_UID")); err == nil && n >= 0 {
			return n
		}
	}
	return uid
}
