package main

import (
	"os"

	"github.com/spf13/pflag"
)

// envString defines the string flag name whose value, when the command
// line does not give it, comes from the environment variable env, else
// def. --help prints a flag's default, and a variable may hold a secret
// (a provider key, a token, a ledger URL with a password): the default it
// prints is def, never the variable's value, and usage names the variable.
func envString(f *pflag.FlagSet, p *string, name, env, def, usage string) {
	f.StringVar(p, name, def, usage+" (env "+env+")")
	if v := os.Getenv(env); v != "" {
		*p = v // after the flag is defined, so that its printed default stays def
	}
}
