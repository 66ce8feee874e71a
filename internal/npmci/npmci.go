//go:build unix

// Package npmci installs the npm packages a test needs from a directory's
// committed package-lock.json, safely when several test binaries start at
// once.
package npmci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Timeout bounds one npm ci.
const Timeout = 5 * time.Minute

// ErrNoNPM is matched by Install's error when npm is not on PATH.
var ErrNoNPM = errors.New("npmci: npm not found")

// Install runs npm ci for the lockfile in dir unless dir/node_modules
// exists. Installs are serialised by an flock(2) on a lock file in the
// temporary directory, and npm works in a staging directory inside dir
// whose node_modules is renamed into place when complete, so nobody ever
// sees a half-installed tree.
func Install(ctx context.Context, dir string) error {
	target := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%w (needed to install %s/package-lock.json)", ErrNoNPM, dir)
	}
	sum := sha256.Sum256([]byte(dir))
	lockPath := filepath.Join(os.TempDir(), fmt.Sprintf("idemkit-npmci-%d-%s.lock", os.Getuid(), hex.EncodeToString(sum[:8])))
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("npmci: install lock: %w", err)
	}
	defer lock.Close() // releases the flock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("npmci: install lock %s: %w", lockPath, err)
	}
	if _, err := os.Stat(target); err == nil {
		return nil // installed while we waited for the lock
	}
	staging := filepath.Join(dir, ".node_modules.staging")
	if err := os.RemoveAll(staging); err != nil { // left by a crash
		return err
	}
	if err := os.Mkdir(staging, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("npmci: %w", err)
		}
		if err := os.WriteFile(filepath.Join(staging, name), b, 0o644); err != nil {
			return err
		}
	}
	ictx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ictx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = staging
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npmci: npm ci for %s: %v\n%s", dir, err, out)
	}
	if err := os.Rename(filepath.Join(staging, "node_modules"), target); err != nil {
		return fmt.Errorf("npmci: install: %w", err)
	}
	return nil
}
