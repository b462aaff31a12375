// Exit codes scripts can trust, and the two kinds of failure the CLI reports.
//   0: fine. 1: a problem was found (or the command could not do its job). 2: usage error.

export const EXIT_OK = 0;
export const EXIT_PROBLEM = 1;
export const EXIT_USAGE = 2;

/** A problem found or an operation refused: exit 1. `hint` says what to do next. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

/** The command line itself is wrong: exit 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
  }
}
