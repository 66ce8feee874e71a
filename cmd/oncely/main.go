// Command oncely shows oncely at work and operates its ledgers.
//
//	oncely demo                 a seeded agent workload under faults, naive vs oncely
//	oncely ledger init|ls|show|stuck|purge|resolve
//	oncely reconcile [--watch]  settle stuck records with the providers
//	oncely key                  derive an action key, to debug identity fields
//	oncely serve-fakes          the fake providers as standalone servers
//	oncely mcp                  an MCP gateway making another server's tools exactly-once
//	oncely console              the operator console of a ledger, in a browser
//	oncely version
//
// A ledger is chosen by URL (--ledger, or ONCELY_LEDGER): sqlite://path/oncely.db
// (the default, ./oncely.db), dynamodb://TABLE?region=...&endpoint=...,
// postgres://... or redis://....
//
// Listings print aligned tables (colour only on a terminal, never with
// NO_COLOR) or JSON with --json. Errors are one line on stderr with a hint;
// the exit status is 2 for usage and configuration errors, 1 for
// operational failures.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oncely/oncely"
)

// Exit statuses.
const (
	exitOK          = 0
	exitOperational = 1
	exitUsage       = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	quietLibraries()
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	code, msg, hint := describe(err, cmd)
	if hint == "" {
		hint = "see '" + commandPath(cmd) + " --help'"
	}
	line := "oncely: " + oneLine(msg)
	if hint != "" {
		line += " (hint: " + oneLine(hint) + ")"
	}
	fmt.Fprintln(stderr, line)
	return code
}

// cliError is an error with its exit status and a hint for the user.
type cliError struct {
	code int
	err  error
	hint string
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// usageErr is a usage or configuration error (exit 2).
func usageErr(hint, format string, args ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, args...), hint: hint}
}

// opErr is an operational failure (exit 1).
func opErr(err error, hint string) error {
	return &cliError{code: exitOperational, err: err, hint: hint}
}

// describe turns an error into an exit status, a message and a hint.
// Errors that are not a *cliError come from the command line parser.
func describe(err error, cmd *cobra.Command) (int, string, string) {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code, ce.err.Error(), ce.hint
	}
	return exitUsage, err.Error(), "see '" + commandPath(cmd) + " --help'"
}

func commandPath(cmd *cobra.Command) string {
	if cmd == nil {
		return "oncely"
	}
	return cmd.CommandPath()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "oncely",
		Short: "Show oncely at work and operate its ledgers",
		Long: `oncely shows oncely at work (oncely demo) and operates its ledgers.

A ledger is chosen by URL with --ledger or the ONCELY_LEDGER environment
variable: sqlite://path/oncely.db (the default: ./oncely.db),
dynamodb://TABLE?region=REGION[&endpoint=URL] (credentials from the
standard AWS chain), postgres://user@host/db[?schema=S&table=T] or
redis://host:6379/0[?prefix=P&wait=N&durability=D] (a server that
would lose or evict claims is refused unless durability=restart or
unchecked says what to accept).

Exit status: 0 success, 1 operational failure, 2 usage or configuration error.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		Version:           oncely.Version,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate(versionLine + "\n") // oncely --version prints what oncely version does
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("see '"+c.CommandPath()+" --help'", "%v", err)
	})
	root.AddCommand(newDemoCmd(), newKeyCmd(), newServeFakesCmd(), newVersionCmd())
	root.AddCommand(ledgerCommands()...)
	return root
}

// groupRunE runs a command that only groups subcommands: its help
// without arguments, and an unknown subcommand is a usage error, as at
// the root (cobra itself would print the help and succeed).
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only by its own lookup
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += " Did you mean this? " + strings.Join(s, ", ")
	}
	return usageErr("see '"+cmd.CommandPath()+" --help'", "%s", msg)
}

// versionLine is what oncely version and oncely --version print.
var versionLine = "oncely " + oncely.Version

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the oncely version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"version": oncely.Version, "user_agent": oncely.UserAgent})
			}
			fmt.Fprintln(cmd.OutOrStdout(), versionLine)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
