//go:build unix

package tooling

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

// NPMTimeout bounds one npm ci.
const NPMTimeout = 5 * time.Minute

// ErrNoNPM is matched by NPMCI's error when npm is not on PATH.
var ErrNoNPM = errors.New("tooling: npm not found")

// ErrNoGo is matched by GoInstall's error when go is not on PATH.
var ErrNoGo = errors.New("tooling: go not found")

// once runs install unless target exists: under an exclusive flock(2) on
// lockPath, looking for target again once the lock is held, so processes
// that start at once install it once.
func once(lockPath, target string, install func() error) error {
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("tooling: install lock: %w", err)
	}
	defer lock.Close() // releases the flock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("tooling: install lock %s: %w", lockPath, err)
	}
	if _, err := os.Stat(target); err == nil {
		return nil // installed while we waited for the lock
	}
	return install()
}

// NPMCI runs npm ci for the lockfile in dir unless dir/node_modules
// exists. Installs are serialised by an flock(2) on a lock file in the
// temporary directory, and npm works in a staging directory inside dir
// (with dir's package.json, package-lock.json and .npmrc) whose
// node_modules is renamed into place when complete, so nobody ever sees a
// half-installed tree. A staging directory left by a crash is replaced.
func NPMCI(ctx context.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%w (needed to install %s/package-lock.json)", ErrNoNPM, dir)
	}
	return npmCI(ctx, dir, npm)
}

// npmCI is NPMCI with the npm to run.
func npmCI(ctx context.Context, dir, npm string) error {
	sum := sha256.Sum256([]byte(dir))
	lockPath := filepath.Join(os.TempDir(), fmt.Sprintf("oncely-npmci-%d-%s.lock", os.Getuid(), hex.EncodeToString(sum[:8])))
	target := filepath.Join(dir, "node_modules")
	return once(lockPath, target, func() error {
		staging := filepath.Join(dir, ".node_modules.staging")
		if err := os.RemoveAll(staging); err != nil { // left by a crash
			return err
		}
		if err := os.Mkdir(staging, 0o755); err != nil {
			return err
		}
		defer os.RemoveAll(staging)
		for _, name := range []string{"package.json", "package-lock.json", ".npmrc"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if errors.Is(err, os.ErrNotExist) && name == ".npmrc" {
				continue
			}
			if err != nil {
				return fmt.Errorf("tooling: npm ci: %w", err)
			}
			if err := os.WriteFile(filepath.Join(staging, name), b, 0o644); err != nil {
				return err
			}
		}
		ictx, cancel := context.WithTimeout(ctx, NPMTimeout)
		defer cancel()
		cmd := exec.CommandContext(ictx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = staging
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("tooling: npm ci for %s: %v\n%s", dir, err, out)
		}
		if err := os.Rename(filepath.Join(staging, "node_modules"), target); err != nil {
			return fmt.Errorf("tooling: npm ci: %w", err)
		}
		return nil
	})
}

// GoInstall installs pkg ("module/path/cmd@version") as dir/name, unless
// that file exists. Installs are serialised by an flock(2) on dir+".lock",
// and go install writes into the staging directory dir+".staging" (GOBIN),
// whose binary is renamed into place when complete, so nobody ever runs a
// half-written binary. GOFLAGS is cleared for the install. ctx bounds it.
func GoInstall(ctx context.Context, dir, pkg, name string) error {
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return nil
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("%w (needed to install %s)", ErrNoGo, pkg)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("tooling: go install: %w", err)
	}
	return once(dir+".lock", bin, func() error {
		staging := dir + ".staging"
		if err := os.RemoveAll(staging); err != nil { // left by a crash
			return err
		}
		defer os.RemoveAll(staging)
		cmd := exec.CommandContext(ctx, goCmd, "install", pkg)
		cmd.Dir = filepath.Dir(dir)
		cmd.Env = append(os.Environ(), "GOBIN="+staging, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("tooling: go install %s: %v\n%s", pkg, err, out)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("tooling: go install: %w", err)
		}
		if err := os.Rename(filepath.Join(staging, name), bin); err != nil {
			return fmt.Errorf("tooling: go install: %w", err)
		}
		return nil
	})
}
