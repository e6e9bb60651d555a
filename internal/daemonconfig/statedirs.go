package daemonconfig

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// stateDir is a directory holding the daemon's secrets or its audit log, and
// the config field that names it.
type stateDir struct{ field, path string }

// stateDirs are the directories whose modes matter: the data directory (it
// also holds the database and its WAL) and the file key directory.
func (c *Config) stateDirs() []stateDir {
	dirs := []stateDir{{"data_dir", c.DataDir}}
	db := filepath.Dir(filepath.Join(c.DataDir, "cardsign.db"))
	if db != c.DataDir {
		dirs = append(dirs, stateDir{"data_dir", db})
	}
	if c.Keys.Dir != "" && c.Keys.Dir != c.DataDir {
		dirs = append(dirs, stateDir{"keys.dir", c.Keys.Dir})
	}
	return dirs
}

// checkDirModes inspects existing state directories. Group- or world-
// writable is a problem: another user could swap the database, the WAL or a
// key file (renaming within a writable directory needs no access to the
// file itself). Group- or world-readable is a warning: the files inside are
// 0600, but their names (kids) and sizes are visible. A directory that does
// not exist yet is fine: cardsignd creates it with mode 0700.
func checkDirModes(dirs []stateDir) (problems, warnings []Problem) {
	for _, d := range dirs {
		fi, err := os.Stat(d.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			problems = append(problems, Problem{Path: d.field, Message: fmt.Sprintf("%s: %v", d.path, err)})
			continue
		}
		if !fi.IsDir() {
			problems = append(problems, Problem{Path: d.field, Message: fmt.Sprintf("%s is not a directory", d.path)})
			continue
		}
		mode := fi.Mode().Perm()
		switch {
		case mode&0o022 != 0:
			problems = append(problems, Problem{Path: d.field, Message: fmt.Sprintf(
				"%s has mode %04o (group- or world-writable): another user could replace the database or the keys; run: chmod 700 %s",
				d.path, mode, d.path)})
		case mode&0o044 != 0:
			warnings = append(warnings, Problem{Path: d.field, Message: fmt.Sprintf(
				"%s has mode %04o (group- or world-readable): other users can list the key and database files; run: chmod 700 %s",
				d.path, mode, d.path)})
		}
	}
	return problems, warnings
}

// CheckStateDirs is checkDirModes at start: problems stop the daemon,
// warnings are logged.
func (c *Config) CheckStateDirs(log *slog.Logger) error {
	probs, warns := checkDirModes(c.stateDirs())
	for _, w := range warns {
		log.Warn("state directory is readable by other users", "field", w.Path, "problem", w.Message)
	}
	if len(probs) > 0 {
		return &Error{File: c.file, Problems: probs, positions: c.positions}
	}
	return nil
}

// ReportStateDirs is checkDirModes for --check-config: warnings are printed,
// problems returned.
func (c *Config) ReportStateDirs(w io.Writer) error {
	probs, warns := checkDirModes(c.stateDirs())
	for _, p := range warns {
		fmt.Fprintf(w, "warning: %s: %s\n", p.Path, p.Message)
	}
	if len(probs) > 0 {
		return &Error{File: c.file, Problems: probs, positions: c.positions}
	}
	return nil
}
